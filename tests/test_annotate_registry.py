"""The module registry: AnnotateConfig, checks and building come from it; CONTRIBUTING's toy module runs."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from annotate_helpers import REPO, make_synthetic
from steerable.annotate.config import AnnotateConfig
from steerable.annotate.module import ModuleSettings
from steerable.annotate.registry import MODULES
from steerable.cli.flags import iter_flags

# The toy module of CONTRIBUTING.md ("Adding an annotation module"), verbatim in substance.
TOY = '''
from steerable.annotate.module import AnnotationModule, BuildContext, ModuleOutput, ModuleSettings, ModuleStage


class EchoConfig(ModuleSettings):
    section = "echo"
    upper: bool = False


class EchoModule:
    name = "echo"
    requires = ()

    def __init__(self, config):
        self.config = config

    def fingerprint(self):
        return {"config": self.config.model_dump(mode="json"), "algorithm": 1}

    async def run(self, ctx):
        task = ctx.task.upper() if self.config.upper else ctx.task
        row = {"role": "user", "content": task, "style": "task_aug",
               "timestamp": float(ctx.timestamps[0]), "camera": None, "tool_calls": None}
        return ModuleOutput(rows=[row])


class EchoStage(ModuleStage[EchoConfig]):
    name = "echo"
    settings_type = EchoConfig
    needs_model = False

    def build(self, ctx: BuildContext) -> AnnotationModule:
        return EchoModule(self.settings)
'''


def test_every_registered_module_has_a_switchable_settings_section() -> None:
    flags = {name for name, *_ in iter_flags(AnnotateConfig)}
    cfg = AnnotateConfig(root=Path("/nowhere"))
    for stage in MODULES:
        assert issubclass(stage.settings_type, ModuleSettings)
        assert f"{stage.name}.enabled" in flags
        assert isinstance(cfg.settings(stage.name), stage.settings_type)
    assert [s.name for s in cfg.stages()] == [s.name for s in MODULES]


def test_the_toy_module_of_contributing_runs_with_one_registry_line(tmp_path: Path) -> None:
    root = make_synthetic(tmp_path / "ds", episodes=2)
    (tmp_path / "toy_echo.py").write_text(TOY)
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import steerable.annotate.registry as registry
        from toy_echo import EchoStage
        registry.MODULES = (*registry.MODULES, EchoStage)  # the one registry line
        from steerable.cli.main import main
        sys.exit(main(["annotate", "--root", {str(root)!r}, "--echo.upper", "true"]))
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "echo" in result.stdout.splitlines()[0]
    summary = json.loads((root / ".steerable" / "run_summary.json").read_text())
    assert summary["per_module"]["echo"]["rows_by_style"] == {"task_aug": 2}
    assert summary["producers"]["task_aug"] == "heuristic:echo"
