"""The local stack's reading of template.yaml: parsed once, each caller with its own copy."""

from __future__ import annotations

from pathlib import Path

from quota_local.template import load_template


def test_a_caller_changing_the_template_it_got_changes_no_other_callers() -> None:
    first = load_template()
    first["Resources"].clear()
    assert load_template()["Resources"], "the next caller still sees every resource"


def test_a_changed_file_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "template.yaml"
    path.write_text("Resources:\n  Topic:\n    Type: AWS::SNS::Topic\n")
    assert list(load_template(path)["Resources"]) == ["Topic"]
    path.write_text("Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n    Arn: !GetAtt Q.Arn\n")
    template = load_template(path)
    assert template["Resources"]["Queue"]["Arn"] == {"Fn::GetAtt": ["Q", "Arn"]}
