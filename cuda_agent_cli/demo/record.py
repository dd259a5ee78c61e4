"""Regenerate the recorded demo sessions from the kernel sources: python -m cuda_agent_cli.demo.record"""

from cuda_agent_cli.demo import KERNELS, render_replay, replay_path

if __name__ == "__main__":
    for device in KERNELS:
        replay_path(device).write_text(render_replay(device))
        print(f"wrote {replay_path(device)}")
