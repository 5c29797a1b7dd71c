"""Template files, their manifest pins, and the one-pass filling rules."""

from __future__ import annotations

import shutil

import pytest

from ray_knowsim.prompts import templates as T

EXPECTED = {
    "user_first", "user_turn", "extractor", "assistant_minimal", "assistant_socratic", "assistant_adaptive",
    "assistant_comprehensive", "graph_math", "graph_open", "rater", "termination_judge", "baseline_zero_shot",
    "baseline_zero_shot_cot", "baseline_cot_profile", "repair", "assistant_simple", "common", "simulator_review",
}
#: placeholders a system message may hold: static per role and task, never per session
STATIC_PLACEHOLDERS = {"terminate_rule", "reasons", "task_noun", "opening_rule", "goal",
                       "kinds", "severities"}  # the simulator review's error vocabulary (schema/review.py)


def test_manifest_pins_every_shipped_template_and_matches_the_files():
    assert T.check_manifest() == []
    assert set(T.template_names()) == EXPECTED
    for name in EXPECTED:
        tpl = T.load_template(name)
        assert tpl.prompt_version == f"{name}@{tpl.version}"
        assert tpl.version.startswith("v")


def test_every_prompt_keeps_static_text_first():
    for name in EXPECTED - {"repair"}:
        tpl = T.load_template(name)
        last = "user" if "user" in tpl.sections else "system"
        if last == "user":  # the system message is the static part: no per-session facts in it
            assert tpl.placeholders("system") <= STATIC_PLACEHOLDERS, name


def test_fill_is_one_pass_and_reports_missing_values():
    tpl = T.Template("x", "v1", {"user": "a {{p}} b {{q}}"})
    assert tpl.fill("user", {"p": "{{q}}", "q": "\\frac{1}{2}"}) == "a {{q}} b \\frac{1}{2}"
    with pytest.raises(T.TemplateError, match=r"\['q'\]"):
        tpl.fill("user", {"p": 1})
    with pytest.raises(T.TemplateError, match="no section"):
        tpl.section("system")


def test_section_parsing_rejects_malformed_files():
    assert T.parse_sections("# note\n@@ system\nhello\n\n@@ user\nbye\n", "f") == {"system": "hello", "user": "bye"}
    with pytest.raises(T.TemplateError, match="before the first"):
        T.parse_sections("stray\n@@ system\nx", "f")
    with pytest.raises(T.TemplateError, match="twice"):
        T.parse_sections("@@ system\nx\n@@ system\ny", "f")


def test_an_edited_pinned_template_refuses_to_load(tmp_path, monkeypatch):
    folder = tmp_path / "templates"
    shutil.copytree(T._templates_dir(), folder)
    path = folder / "rater.v1.txt"
    path.write_text(path.read_text() + "\nA quiet extra sentence.\n")
    monkeypatch.setattr(T, "_templates_dir", lambda: folder)
    T.load_template.cache_clear()
    try:
        with pytest.raises(T.TemplateError, match="changed after it was pinned"):
            T.load_template("rater", "v1")
        assert any("rater@v1" in p for p in T.check_manifest())
        (folder / "rater.v9.txt").write_text(path.read_text())
        assert any("rater@v9: newer than the pinned v3" in p for p in T.check_manifest())
    finally:
        T.load_template.cache_clear()


def test_every_pinned_version_stays_loadable_and_prompt_sets_fall_back():
    pins = T.read_pins()
    for name, versions in pins.items():
        for version in versions:
            assert T.load_template(name, version).version == version
    assert T.load_template("user_turn", "v1").version == "v1" and T.load_template("user_turn").version == "v3"
    assert T.load_template("user_turn", "v2").version == "v2"
    assert T.load_template("repair", "v3").version == "v1" and T.load_template("graph_math", "v3").version == "v2"
    assert T.DEFAULT_PROMPTS == "v3" == T.PROMPT_SETS[-1]
    with pytest.raises(T.TemplateError, match="no version in prompt set"):
        T.load_template("assistant_simple", "v1")
    assert T.in_prompt_set("common", "v3") and not T.in_prompt_set("common", "v2") and not T.in_prompt_set("nope", "v3")
