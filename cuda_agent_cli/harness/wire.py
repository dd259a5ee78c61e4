"""The messages of the locked jobs (tools/wire.py), as the harness's process imports them.

tools/ ships inside the package as `cuda_agent_cli.assets.tools`, a name only the installed
package knows; the type checker reads the same file from the source tree as `tools.wire`.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tools.wire import (
        BaselinesInfo,
        Block,
        Burst,
        Claims,
        CompileResult,
        EvaluateResult,
        InputsResult,
        JudgedCall,
        JudgeResult,
        SideBlocks,
    )
else:
    from cuda_agent_cli.assets.tools.wire import (
        BaselinesInfo,
        Block,
        Burst,
        Claims,
        CompileResult,
        EvaluateResult,
        InputsResult,
        JudgedCall,
        JudgeResult,
        SideBlocks,
    )

__all__ = [
    "BaselinesInfo",
    "Block",
    "Burst",
    "Claims",
    "CompileResult",
    "EvaluateResult",
    "InputsResult",
    "JudgedCall",
    "JudgeResult",
    "SideBlocks",
]
