"""Reports people read: the terminal table, the JSON document, Markdown, HTML pages, graph exports."""

from .export import graph_document, to_dot, to_graphml
from .html import IndexEntry, index_html, page_name, trajectory_html, write_html_dir
from .json_report import REPORT_VERSION, run_document, trajectory_document, write_json
from .markdown import markdown_report
from .schema import committed_report_schema, report_schema
from .cells import plural
from .terminal import print_revalidation, print_run_summary, print_trajectory

__all__ = [
    "plural",
    "REPORT_VERSION",
    "IndexEntry",
    "committed_report_schema",
    "graph_document",
    "index_html",
    "markdown_report",
    "page_name",
    "print_revalidation",
    "print_run_summary",
    "print_trajectory",
    "report_schema",
    "run_document",
    "to_dot",
    "to_graphml",
    "trajectory_document",
    "trajectory_html",
    "write_html_dir",
    "write_json",
]
