"""The ``tool-gateway test`` report as JUnit XML, the format CI systems read (GitLab, Jenkins, GitHub actions).

    <testsuites tests failures errors skipped time>
      <testsuite name="<tool id>" tests failures errors skipped time>      one per tool
        <testcase classname="<tool id>" name="example 1: <title>" file line time>
          <failure message="..." type="...">every failing line, the traceback</failure>   or
          <skipped message="why"/>
        <testcase ... name="generated arguments">                          one per tool

``xml.etree`` escapes markup; characters XML 1.0 cannot hold at all (control characters, lone surrogates — a tool
may answer anything) are replaced first, or the file would not parse.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from .run import FAILED, SKIPPED, Case, ToolReport

_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _text(value: str) -> str:
    return _NOT_XML.sub("\ufffd", value)


def junit_xml(reports: Sequence[ToolReport]) -> ET.ElementTree:
    root = ET.Element("testsuites", name="tool-gateway test")
    for report in reports:
        suite = ET.SubElement(root, "testsuite", name=_text(report.tool))
        for case in report.cases:
            case_file, case_line = _location(case.where)
            element = ET.SubElement(suite, "testcase", classname=_text(report.tool), name=_text(case.name),
                                    file=_text(case_file), line=case_line, time=f"{case.duration_s:.3f}")
            if case.status == FAILED:
                failure = ET.SubElement(element, "failure", message=_text(case.message), type="ContractFailure")
                failure.text = _text("\n".join([*case.failures, *([case.traceback] if case.traceback else [])]))
            elif case.status == SKIPPED:
                ET.SubElement(element, "skipped", message=_text(case.message))
        _count(suite, report.cases)
    _count(root, [case for report in reports for case in report.cases])
    return ET.ElementTree(root)


def write_junit(reports: Sequence[ToolReport], path: str | Path) -> None:
    """Write the report to ``path`` (its directory made if missing)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tree = junit_xml(reports)
    ET.indent(tree)
    tree.write(target, encoding="utf-8", xml_declaration=True)


def _count(element: ET.Element, cases: Sequence[Case]) -> None:
    element.set("tests", str(len(cases)))
    element.set("failures", str(sum(case.status == FAILED for case in cases)))
    element.set("errors", "0")  # a crash of the tester itself ends the run; every finding is a failure
    element.set("skipped", str(sum(case.status == SKIPPED for case in cases)))
    element.set("time", f"{sum(case.duration_s for case in cases):.3f}")


def _location(where: str) -> tuple[str, str]:
    """(file, line) of ``file:line:col``."""
    file, line, _column = where.rsplit(":", 2)
    return file, line
