"""The object description (`meta/objects.json`, steerable.dataset.objects): the policy's objects, end
effector and world lengths come from it, never from state names or simulator constants. The
simulator writes it; a user writes it by hand; a checkpoint from before it is migrated once on load
(docs/policy.md, "Grounding words in objects"; docs/make-dataset.md, "The object description")."""

from __future__ import annotations

import io
import json
import re
import shutil
import tokenize
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from policy_helpers import TINY, TINY_FLAGS, easy_privileged_dataset, one_thread  # noqa: F401
from steerable.dataset import open_dataset
from steerable.dataset.build import DatasetBuilder
from steerable.dataset.objects import (
    OBJECTS_PATH,
    parse_object_schema,
    read_object_schema,
    write_object_schema,
)
from steerable.dataset.writer import EpisodeLanguage, write_language
from steerable.errors import ConfigError
from steerable.policy.checkpoint import load_policy, save_checkpoint
from steerable.policy.counterexamples import moved_away
from steerable.policy.data import PolicyDataset
from steerable.policy.legacy_objects import migrate_objects
from steerable.policy.objects import command_relation, object_layout
from steerable.policy.setup import build_fresh
from steerable.recipes import load_recipe

# A world that is not the simulator's: the arm's state names no object, the scene's dimensions are
# p0..p7, and the words are "mug", "jar" and "tray".
ARM = ["tcp_a", "tcp_b", "tcp_c", "grip"]
SCENE = [f"p{k}" for k in range(8)]
KITCHEN = {
    "format": 1,
    "end_effector": {"feature": "observation.state", "x": "tcp_a", "y": "tcp_b", "z": "tcp_c"},
    "objects": [
        {"name": "mug", "kind": "vessel", "feature": "observation.environment_state", "x": "p0", "y": "p1", "z": "p2"},
        {"name": "jar", "kind": "vessel", "feature": "observation.environment_state", "x": 3, "y": 4, "z": 5},
        {"name": "tray", "feature": "observation.environment_state", "x": "p6", "y": "p7"},
    ],
    "scales": {"relation": 0.2, "rest_height": 0.01, "check_clearance": 0.04, "check_band": 0.05,
               "fine_offsets": [3.0]},
}


def _kitchen(root: Path, description: dict[str, Any] | None = KITCHEN) -> Path:
    """Four episodes: the arm moves, then holds still; "lift the mug" then "set the mug onto the tray"."""
    features = {"observation.state": {"dtype": "float32", "shape": [4], "names": ARM},
                "observation.environment_state": {"dtype": "float32", "shape": [8], "names": SCENE},
                "action": {"dtype": "float32", "shape": [4], "names": ARM}}
    rng = np.random.default_rng(0)
    with DatasetBuilder(root, fps=10, features=features, robot_type="arm") as builder:
        for k in range(4):
            t = np.minimum(np.arange(36, dtype=np.float32) / 20, 1.0)[:, None]
            arm = np.concatenate([0.2 + 0.3 * t, 0.1 + 0.2 * t, 0.05 + 0 * t, (t > 0.5)], axis=1).astype(np.float32)
            scene = rng.uniform(0, 0.5, size=(1, 8)).astype(np.float32).repeat(len(t), 0)
            builder.add_episode(f"set the {('mug', 'jar')[k % 2]} onto the tray",
                                {"observation.state": arm, "observation.environment_state": scene, "action": arm})
    ds = open_dataset(root)

    def row(style: str, content: str, at: float) -> dict[str, Any]:
        return {"role": "assistant", "content": content, "style": style, "camera": None, "tool_calls": None,
                "timestamp": at}

    updates = {}
    for e in ds.episodes:
        thing = ("mug", "jar")[e.episode_index % 2]
        steps = [f"lift the {thing}", f"set the {thing} onto the tray"]
        updates[e.episode_index] = EpisodeLanguage(persistent=[
            r for i, step in enumerate(steps)
            for r in (row("subtask", step, 1.0 * i), row("plan", "\n".join(f"{j + 1}. {s}" for j, s in
                                                                              enumerate(steps[i:])), 1.0 * i))])
    write_language(ds, updates)
    if description is not None:
        (root / OBJECTS_PATH).write_text(json.dumps(description), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def kitchen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _kitchen(tmp_path_factory.mktemp("kitchen") / "ds")


@pytest.fixture(scope="module")
def privileged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return easy_privileged_dataset(tmp_path_factory, "schema")


# -- the file -----------------------------------------------------------------------------------


def test_a_hand_written_description_reads_back_as_written(tmp_path: Path) -> None:
    schema = parse_object_schema(KITCHEN)
    assert [(o.name, o.kind) for o in schema.objects] == [("mug", "vessel"), ("jar", "vessel"), ("tray", "")]
    assert schema.objects[1].dims.x == 3 and schema.objects[2].dims.z is None
    assert schema.scales.fine_offsets == (3.0,) and schema.end_effector is not None
    write_object_schema(tmp_path, schema)
    assert read_object_schema(tmp_path) == schema
    assert read_object_schema(tmp_path / "nothing") is None  # a dataset without one


def _without(block: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k != key}


BAD = [
    ([], "must be a JSON object"),
    ({**KITCHEN, "object": []}, "unknown key"),
    (_without(KITCHEN, "scales"), "no scales"),
    ({**KITCHEN, "format": 2}, "format 2"),
    ({**KITCHEN, "end_effector": {"feature": "observation.state", "x": "tcp_a", "y": "tcp_b"}}, "end_effector: no 'z'"),
    ({**KITCHEN, "objects": [_without(KITCHEN["objects"][0], "x")]}, r"objects\[0\]: no 'x'"),
    ({**KITCHEN, "objects": [KITCHEN["objects"][0], {**KITCHEN["objects"][1], "name": "Mug"}]}, "two objects"),
    ({**KITCHEN, "objects": [{**KITCHEN["objects"][0], "y": 1.5}]}, "dimension's name or index"),
    ({**KITCHEN, "objects": [{**KITCHEN["objects"][0], "name": " "}]}, "non-empty string"),
    ({**KITCHEN, "scales": {**KITCHEN["scales"], "relation": 0}}, "relation must be > 0"),
    ({**KITCHEN, "scales": {**KITCHEN["scales"], "fine_offsets": 4}}, "list of magnifications"),
    ({**KITCHEN, "scales": _without(KITCHEN["scales"], "check_band")}, "no check_band"),
]


@pytest.mark.parametrize("data, message", BAD)
def test_a_bad_description_is_one_line_naming_what_is_wrong(data: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        parse_object_schema(data, "ds/meta/objects.json")
    assert str(caught.value).startswith("ds/meta/objects.json") and "\n" not in str(caught.value)


@pytest.mark.parametrize("change, message", [
    (lambda d: d["objects"][0].update(x="cup.x"), "'cup.x', not a dimension of 'observation.environment_state'"),
    (lambda d: d["objects"][1].update(x=8), "dimension 8 of 'observation.environment_state', which has 8"),
    (lambda d: d["objects"][2].update(feature="observation.scene"), "'observation.scene', which the dataset"),
    (lambda d: None, "not readable JSON"),
])
def test_train_refuses_a_description_that_does_not_fit_the_dataset_in_one_line(
        kitchen: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], change: Any, message: str) -> None:
    from steerable.cli.main import main

    root = tmp_path / "ds"
    shutil.copytree(kitchen, root, symlinks=True)
    bad = json.loads(json.dumps(KITCHEN))
    change(bad)
    (root / OBJECTS_PATH).unlink()  # a copy of the file, never the fixture's (copytree may link)
    (root / OBJECTS_PATH).write_text(json.dumps(bad) if message != "not readable JSON" else "{", encoding="utf-8")
    assert main(["train", "--dataset", str(root), "--output_dir", str(tmp_path / "o"), "--steps", "1",
                 "--batch_size", "2", "--no_progress", *TINY_FLAGS]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err and "Traceback" not in err


# -- the simulator's description: the same objects, buffers, relations and counter-examples -----------

# The old convention's objects of the simulator's privileged state, by hand: the end effector at 0-2,
# each cube (x, y, z, present) from 4, each receptacle (x, y, present) from 28.
CUBES = ["red cube", "green cube", "orange cube", "purple cube", "pink cube", "cyan cube"]
PLACES = ["blue bin", "yellow bin", "grey bin", "left zone", "right zone"]
EXPECTED = ([(name, (4 + 4 * k, 5 + 4 * k, 6 + 4 * k), 7 + 4 * k) for k, name in enumerate(CUBES)]
            + [(name, (28 + 3 * k, 29 + 3 * k, None), 30 + 3 * k) for k, name in enumerate(PLACES)])


def test_the_simulator_describes_its_objects_with_and_without_the_privileged_state(privileged: Path,
                                                                                  tmp_path: Path) -> None:
    from steerable.synthetic import generate_synthetic

    schema = read_object_schema(privileged)
    assert schema is not None and [o.name for o in schema.objects] == CUBES + PLACES
    assert {o.kind for o in schema.objects} == {"cube", "bin", "zone"}
    plain = generate_synthetic(tmp_path / "plain", episodes=1, cameras=("wrist",))
    assert read_object_schema(plain) is None  # no position recorded: nothing to describe
    cfg = build_fresh(open_dataset(plain), {**TINY}, eval_fraction=0.0, seed=0).model.cfg
    assert cfg.objects == {} and cfg.name_slots == [] and cfg.object_tokens == []


@pytest.fixture(scope="module")
def built(privileged: Path) -> Any:
    torch.manual_seed(0)
    return build_fresh(open_dataset(privileged), {**TINY, "cameras": ["none"]}, eval_fraction=0.0, seed=0)


def test_the_grounding_buffers_are_the_old_name_parsings(built: Any, tmp_path: Path) -> None:
    model, cfg, tok = built.model, built.model.cfg, built.processor.tokenizer
    layout = object_layout(cfg)
    assert layout is not None and layout.end_effector == (0, 1, 2)
    assert [(o.name, o.axes, o.present) for o in layout.objects] == EXPECTED
    assert cfg.name_slots == [CUBES, PLACES[:3], PLACES[3:]]
    # Fields: x, y, z (or the constant 0), present, then the object's offset after state and motion.
    state_in, first = 43 + 3 + 3 * 11, 43 + 3
    fields = model.object_fields.tolist()
    assert fields[0] == [4, 5, 6, 7, first, first + 1, first + 2]
    assert fields[6] == [28, 29, state_in, 30, first + 18, first + 19, first + 20]  # the blue bin: no z
    # Tokens: each name's own word (a colour, left, right); cube, bin and zone are shared.
    words = [name.split()[0] for name in CUBES + PLACES]
    spelled = [tok(" " + w, add_special_tokens=False)["input_ids"] for w in words]
    assert cfg.object_tokens == [ids if len(ids) == 1 else [] for ids in spelled]
    assert torch.equal(model.object_match.nonzero(), torch.tensor(
        sorted((ids[0], o) for o, ids in enumerate(spelled) if len(ids) == 1)))
    assert model.object_in[0].in_features == 7 + 3 * 2  # the fine offsets at 4x and 16x
    # A checkpoint from before the description (no `objects`) loads into the same network.
    where = save_checkpoint(tmp_path, 1, model, built.processor, "blend: {}\n")
    config = json.loads((where / "config.json").read_text())
    del config["objects"]
    (where / "config.json").write_text(json.dumps({**config, "check_clearance": 0.05}))
    old = load_policy(where).model
    assert object_layout(old.cfg) == layout and old.fine_scales == model.fine_scales == (4.0, 16.0)
    assert torch.equal(old.object_fields, model.object_fields) and torch.equal(old.object_match, model.object_match)
    assert migrate_objects({"state_names": ["x", "y"], "check_clearance": 0.05})["objects"] == {}
    assert migrate_objects({"objects": {}, "state_names": cfg.state_names}) == {"objects": {}, "state_names":
                                                                               cfg.state_names}


def test_the_command_relation_and_the_counter_examples_are_the_old_ones(built: Any) -> None:
    cfg = built.model.cfg
    layout = object_layout(cfg)
    s = torch.rand(43) * 0.4
    got = command_relation("place the red cube in the blue bin", layout, s.tolist())
    assert got == pytest.approx([float(s[4] - s[28]) / 0.1, float(s[5] - s[29]) / 0.1, float(s[6]) / 0.1, 0.0])
    got = command_relation("place the green cube on the red cube", layout, s.tolist())
    assert got == pytest.approx([float(s[8] - s[4]) / 0.1, float(s[9] - s[5]) / 0.1, float(s[10] - s[6]) / 0.1, 1.0])
    assert command_relation("pick up the red cube", layout, s.tolist()) is None
    assert command_relation("place the red cube in the blue bin", None, s.tolist()) is None
    for seed in range(20):
        for command, (mx, tx), near in (("place the red cube in the blue bin", (4, 28), 0.05),
                                        ("place the green cube on the red cube", (8, 4), 0.025)):
            # The old draw, by hand: 0.05 m clearance (half on a cube), a 6 cm band, the table at z 0.
            rng = np.random.default_rng(seed)
            reach = float(rng.uniform(near, near + 0.06))
            side = int(rng.integers(4))
            along = float(rng.uniform(-reach, reach))
            dx, dy = [(reach, along), (-reach, along), (along, reach), (along, -reach)][side]
            want = s.clone()
            want[mx], want[mx + 1], want[mx + 2] = float(s[tx]) + dx, float(s[tx + 1]) + dy, 0.0
            want[0] += want[mx] - s[mx]
            want[1] += want[mx + 1] - s[mx + 1]
            assert torch.equal(moved_away(s, command, cfg, layout, np.random.default_rng(seed)), want)


# -- a world that is not the simulator's ------------------------------------------------------------


def test_a_policy_trained_on_a_hand_written_description_grounds_its_words(kitchen: Path, tmp_path: Path) -> None:
    from steerable.cli.main import main

    out = tmp_path / "run"  # the default `steerable train`, in this process (one thread: the fixture)
    assert main(["train", "--dataset", str(kitchen), "--output_dir", str(out), "--steps", "2", "--batch_size", "4",
                 "--no_progress", "--eval_every", "100", *TINY_FLAGS]) == 0
    loaded = load_policy(out)
    model, proc, cfg = loaded.model, loaded.processor, loaded.model.cfg
    assert cfg.state_keys == ["observation.state", "observation.environment_state"]
    layout = object_layout(cfg)
    assert layout is not None and layout.end_effector == (0, 1, 2)
    assert [(o.name, o.axes) for o in layout.objects] == [("mug", (4, 5, 6)), ("jar", (7, 8, 9)),
                                                          ("tray", (10, 11, None))]
    assert cfg.name_slots == [["mug", "jar"]]
    tok = proc.tokenizer
    assert [[tok.decode([t]) for t in ids] for ids in cfg.object_tokens] == [[" mug"], [" jar"], [" tray"]]
    assert model.object_in is not None and model.object_in[0].in_features == 7 + 3  # one fine magnification
    # The expert reads the mug's state at "mug" and the tray's at "tray", nothing at other words.
    ids = torch.tensor([tok("set the mug onto the tray", add_special_tokens=False)["input_ids"]])
    state = torch.full((1, 12), 0.2)
    moved = state.clone()
    moved[0, 4] = 0.4  # the mug moves
    with torch.no_grad():
        a, b = (model.named_objects(ids, proc.model_state(x)) for x in (state, moved))
    assert a is not None and b is not None
    mug, tray = cfg.object_tokens[0][0], cfg.object_tokens[2][0]
    named = [t in (mug, tray) for t in ids[0].tolist()]
    assert (a[0].abs().sum(-1) > 0).tolist() == named and sum(named) == 2
    assert ((a - b).abs().sum(-1)[0] > 0).tolist() == [t == mug for t in ids[0].tolist()]
    # The step check's relation and counter-examples read the description's lengths.
    s = moved[0].tolist()
    assert command_relation("set the mug onto the tray", layout, s) == pytest.approx(
        [(s[4] - s[10]) / 0.2, (s[5] - s[11]) / 0.2, (s[6] - 0.01) / 0.2, 0.0])
    data = PolicyDataset(open_dataset(kitchen), load_recipe("hierarchical"), cfg, proc.image_size,
                         component="low_level_execution")
    assert data.check_items and all(c.endswith("onto the tray") for _, c in data.check_items)
    undone = data[len(data) - 1]
    assert undone is not None and float(undone["check"]) == 0.0
    x = undone["state"]
    thing = 4 if "mug" in data.check_items[-1][1] else 7
    reach = max(abs(float(x[thing] - x[10])), abs(float(x[thing + 1] - x[11])))
    assert 0.04 - 1e-6 <= reach <= 0.09 + 1e-6 and float(x[thing + 2]) == pytest.approx(0.01)


def test_without_a_description_the_policy_trains_with_no_objects(tmp_path: Path) -> None:
    root = _kitchen(tmp_path / "ds", description=None)
    built = build_fresh(open_dataset(root), {**TINY}, eval_fraction=0.0, seed=0)
    cfg = built.model.cfg
    assert cfg.objects == {} and cfg.object_tokens == [] and cfg.name_slots == []
    assert built.model.object_in is None  # no object offsets in the model's state either
    assert built.processor.model_state(torch.zeros(12)).shape == (1, 12 + cfg.motion_dim)
    data = PolicyDataset(open_dataset(root), load_recipe("hierarchical"), cfg, built.processor.image_size,
                         component="low_level_execution")
    assert data.done_items and not data.check_items  # no step check without objects
    batch = built.processor.training_batch(__import__("steerable.train", fromlist=["collate"]).collate(
        [data[0], data[len(data) - 1]]))
    assert torch.isfinite(built.model(batch)["loss"])


# -- no simulator in policy/ --------------------------------------------------------------------------

# The simulator's object words, colours and constants, and its name. "bin" alone is not among them:
# `state_mode bins` discretises the state. The migration of old checkpoints holds the old convention.
SIMULATOR = re.compile(r"cube|zone|\b(red|green|blue|grey|yellow|orange|purple|pink|cyan)\b|red_|\bee\.|"
                       r"\b0\.06\b|\b0\.05\b|\b0\.15\b|synthetic|simulator")
ALLOWED = {
    "legacy_objects.py": "the migration of checkpoints from before the description",
}
ALLOWED_STRINGS = {
    # The record of the dataset a checkpoint learned from, which `steerable run` reads: a name of a
    # key, not knowledge the policy acts on.
    ("checkpoint.py", '"synthetic_difficulty"'),
}


# An f-string's text is one STRING token up to Python 3.11, FSTRING_MIDDLE pieces from 3.12.
_CODE = {tokenize.NAME, tokenize.NUMBER, tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}


def _code_tokens(source: str) -> list[tokenize.TokenInfo]:
    """Names, numbers and strings of `source`, without comments and docstrings."""
    out = []
    before = tokenize.NEWLINE  # the type of the last token that is not a comment or a blank line
    for t in tokenize.generate_tokens(io.StringIO(source).readline):
        if t.type in (tokenize.NL, tokenize.COMMENT):
            continue
        docstring = t.type == tokenize.STRING and before in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
        if t.type in _CODE and not docstring:
            out.append(t)
        before = t.type
    return out


def test_the_policy_package_names_no_simulator_thing() -> None:
    policy = Path(__file__).resolve().parents[1] / "src" / "steerable" / "policy"
    hits = []
    for path in sorted(policy.glob("*.py")):
        if path.name in ALLOWED:
            continue
        for t in _code_tokens(path.read_text(encoding="utf-8")):
            if (path.name, t.string) not in ALLOWED_STRINGS and SIMULATOR.search(t.string):
                hits.append(f"{path.name}:{t.start[0]}: {t.string[:60]}")
    assert not hits, hits
    # The check sees what it is meant to see.
    assert [t.string for t in _code_tokens('"""red cube"""\nx = 0.06  # cube\ny = "ee.x"\n')
            if SIMULATOR.search(t.string)] == ["0.06", '"ee.x"']
