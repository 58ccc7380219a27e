"""Reports people read: the terminal table and the JSON document."""

from .json_report import REPORT_VERSION, run_document, write_json
from .terminal import print_run_summary, print_trajectory

__all__ = ["REPORT_VERSION", "print_run_summary", "print_trajectory", "run_document", "write_json"]
