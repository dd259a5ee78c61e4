from cuda_agent_cli.cli import main

main()
