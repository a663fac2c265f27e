"""--junitxml in a capevolve session: flat properties per rollout, one testcase per verdict."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET

ROLLOUT_PROPERTIES = {"split", "task", "tag", "trial", "seed", "reward", "cost", "infra_error", "feedback"}


def test_junitxml_has_rollout_properties_and_a_testcase_per_verdict(example, projects, capevolve) -> None:
    project = example("toy_calc")
    shutil.copytree(project / "capability", project / "candidates" / "same")  # changes nothing
    (project / "candidates" / "same" / "notes.md").write_text("a no-op for the agent\n")  # its own bytes
    report = project.parent / "junit.xml"
    result = capevolve(project, "careful", "same", gate=True, extra=["-n", "2", f"--junitxml={report}"])
    assert result.ret == 10, result.stdout.str()  # `same` is rejected
    suite = ET.parse(report).getroot().find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    rollouts = [c for c in cases if c.get("classname") != "capevolve.verdicts"]
    verdicts = [c for c in cases if c.get("classname") == "capevolve.verdicts"]

    records = projects.rollout_records(project)
    assert len(rollouts) == len(records) == 12 * 5  # seed, careful, same, two null controls
    for case in rollouts:
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        assert set(props) == ROLLOUT_PROPERTIES  # flat: no JSON blob
        record = records[("val", props["task"], props["tag"], int(props["trial"]))]
        assert float(props["reward"]) == record["reward"] and int(props["seed"]) == record["seed"]
        assert props["feedback"] == (record["feedback"] or "") and props["infra_error"] == ""
        assert float(props["cost"]) == record["cost_usd"]
        assert (case.find("failure") is None) == record["passed"]

    files = {
        p.stem: json.loads(p.read_text()) for p in (projects.run_dir(project) / "verdicts").glob("*.json")
    }
    assert len(verdicts) == len(files) == 4
    by_tag = {}
    for case in verdicts:
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        by_tag[props["tag"]] = case
        verdict = files[props["tag"]]
        assert props["decision"] == verdict["decision"] and props["against"] == verdict["against"]
        assert float(props["p_value"]) == verdict["p_value"] and int(props["n_tasks"]) == 12
        assert props["reason"] == verdict["reason"]
    assert files["careful"]["decision"] == "accept" and files["same"]["decision"] == "reject"
    assert list(by_tag["careful"]) == [by_tag["careful"].find("properties")]  # passed: nothing else
    failure = by_tag["same"].find("failure")
    assert failure is not None and failure.get("message") == f"reject: {files['same']['reason']}"
    for null in ("seed-null1", "seed-null2"):  # a null control passes when it is not accepted
        assert files[null]["decision"] != "accept" and by_tag[null].find("failure") is None
        assert by_tag[null].get("name") == f"{null} vs seed (null control)"
    assert int(suite.get("tests")) == len(cases)
    assert int(suite.get("failures")) == sum(c.find("failure") is not None for c in cases)
