#!/usr/bin/env python3
"""Draw docs/architecture.md's pictures: the modules, and the data flow of recall and sweep.

    python scripts/architecture_diagram.py           # write docs/images/architecture-*.svg
    python scripts/architecture_diagram.py --check   # exit 1 when a file or the page is stale

Each picture is declared once below, as boxes on a grid and arrows between them. From that
one declaration the script writes an SVG (docs/images/) and the Mermaid block that
docs/architecture.md carries between ``<!-- diagram:NAME -->`` markers, so the picture on
GitHub and the image in any other viewer cannot disagree. Standard library only.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from html import escape
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
IMAGES = REPO_ROOT / "docs" / "images"
PAGE = REPO_ROOT / "docs" / "architecture.md"

CELL_W, CELL_H = 250, 92  # one grid cell
BOX_W, BOX_H = 214, 60
MARGIN = 24
CHAR_W = 7.0  # average width of a 12.5 px sans-serif character
GROUP_FILL = {
    "outside": "#eef0f3",
    "provisioning": "#e6f0ff",
    "shared": "#fff4d6",
    "runtime": "#e5f6ea",
    "web": "#f3e8ff",
    "step": "#ffffff",
    "failure": "#fde8e8",
}


@dataclass(frozen=True)
class Box:
    id: str
    label: str  # lines separated by "\n"
    col: float
    row: float
    group: str


@dataclass(frozen=True)
class Arrow:
    source: str
    target: str
    label: str = ""
    dashed: bool = False
    via: tuple[tuple[float, float], ...] = ()  # bends, in grid cells (col, row)


@dataclass(frozen=True)
class Diagram:
    name: str
    title: str
    direction: str  # Mermaid: LR or TB
    boxes: tuple[Box, ...]
    arrows: tuple[Arrow, ...]


MODULES = Diagram(
    "modules",
    "Rooms of the package: who imports whom",
    "LR",
    (
        Box("cli", "nerve CLI", 0, 0.5, "outside"),
        Box("engine", "Nerve's engine", 0, 3, "outside"),
        Box("webui", "Nerve's web UI", 0, 5, "outside"),
        Box("clipkg", "cli/\nparser, one module per group", 1, 0.5, "provisioning"),
        Box("golden", "golden/\ncheck and update", 2, 0, "provisioning"),
        Box("doctor", "doctor/\ncheck type, areas, runner", 2, 1.5, "provisioning"),
        Box("web", "web/\nMemory page, Diagnostics", 2, 5, "web"),
        Box("devgw", "devgateway/\nnerve dev gateway", 1, 2, "web"),
        Box("integ", "integrations/nerve/\nextend_cli, nerve_memory", 1, 4, "web"),
        Box("workspace", "workspace/\ninit, render, placement", 3, 0, "provisioning"),
        Box("templating", "templating/\ntexts, jobs, wording lint", 3, 2, "provisioning"),
        Box("config", "config/\nlayers, ${VAR}, checks", 4, 1, "provisioning"),
        Box("backends", "backends.py\nthe backend registry", 4, 2, "provisioning"),
        Box("sweep", "runtime/sweep/\nSweeper, windows, lock", 2, 3.5, "runtime"),
        Box("loom", "runtime/loom/\nLoomMemory, recall", 3, 3.5, "runtime"),
        Box("state", "runtime/ state · transcripts\nStateStore, nerve.db reader", 3, 5, "runtime"),
        Box("gwclient", "runtime/gateway/\ncatalog, calls, breaker", 4, 3.5, "runtime"),
        Box("gateway", "MCP gateway\nGET /catalog · POST /s/loom/mcp", 5, 2.75, "outside"),
        Box("loomsvc", "Loom", 5, 4.25, "outside"),
    ),
    (
        Arrow("cli", "clipkg"),
        Arrow("clipkg", "golden"),
        Arrow("clipkg", "doctor"),
        Arrow("clipkg", "devgw"),
        Arrow("golden", "workspace"),
        Arrow("doctor", "config"),
        Arrow("doctor", "loom", "health probe"),
        Arrow("workspace", "config"),
        Arrow("workspace", "templating"),
        Arrow("templating", "backends"),
        Arrow("config", "backends"),
        Arrow("templating", "loom", "safe lines"),
        Arrow("engine", "templating", "texts"),
        Arrow("engine", "loom", "recall, health"),
        Arrow("engine", "sweep"),
        Arrow("engine", "integ"),
        Arrow("integ", "clipkg", via=((0.56, 4.0), (0.56, 0.75))),
        Arrow("integ", "state", "state, nerve.db"),
        Arrow("webui", "web"),
        Arrow("web", "loom", "diagnostics()"),
        Arrow("sweep", "loom", "extract"),
        Arrow("sweep", "state"),
        Arrow("loom", "state", "frozen recalls"),
        Arrow("loom", "gwclient"),
        Arrow("gwclient", "gateway"),
        Arrow("gateway", "loomsvc"),
    ),
)

FLOWS = Diagram(
    "flows",
    "Data flow: startup recall (left) and the extraction sweep (right)",
    "TB",
    (
        Box("r1", "a session starts", 0, 0, "outside"),
        Box("r2", "frozen for this session?\nyes: the same lines (REC-3)", 0, 1, "step"),
        Box("r3", "loom_context_pack\nstartup mode, memories only", 0, 2, "step"),
        Box("r4", "loom_search\nthe fallback", 1, 3, "step"),
        Box("r5", "recalled.py: one safe line\nper item, block capped (REC-2)", 0, 4, "shared"),
        Box("r6", "freeze in StateStore", 0, 5, "step"),
        Box("r7", "<session-context> block\ntexts.session_context", 0, 6, "provisioning"),
        Box("rf", "unavailable, refused, no answer\n→ could not be recalled", 1, 5, "failure"),
        Box("s1", "TranscriptSource: messages\nafter the watermark, paged", 2, 0, "outside"),
        Box("s2", "batch within the budget\n100 messages / 128 KiB", 2, 1.5, "step"),
        Box("s3", "loom_memory_set_from_messages\nwaiting, up to 130 s", 2, 3, "step"),
        Box("s4", "watermark past `accepted`\n+ audit, one transaction", 2, 4.5, "step"),
        Box("sf1", "413, call limit, timeout\n→ halve the budget", 3, 1.5, "failure"),
        Box("sf2", "coded fault, may pass\n→ window stops, watermark stays", 3, 3, "failure"),
        Box("sf3", "breaker open, no answer\n→ the sweep ends", 3, 4.5, "failure"),
    ),
    (
        Arrow("r1", "r2"),
        Arrow("r2", "r3", "no"),
        Arrow("r3", "r4", "no memories, or refused"),
        Arrow("r3", "r5", "memories"),
        Arrow("r4", "r5"),
        Arrow("r3", "rf", dashed=True),
        Arrow("r4", "rf", dashed=True),
        Arrow("r5", "r6"),
        Arrow("r6", "r7"),
        Arrow("s1", "s2"),
        Arrow("s2", "s3"),
        Arrow("s3", "s4", "Loom took them"),
        Arrow("s4", "s1", "next window", dashed=True, via=((1.5, 4.5), (1.5, 0))),
        Arrow("s3", "sf1", dashed=True),
        Arrow("s3", "sf2", dashed=True),
        Arrow("s3", "sf3", dashed=True),
    ),
)

DIAGRAMS = (MODULES, FLOWS)


# --- SVG ----------------------------------------------------------------------------------


def _point(col: float, row: float) -> tuple[float, float]:
    """The pixel position of the centre of grid cell (``col``, ``row``)."""
    return MARGIN + col * CELL_W + BOX_W / 2, MARGIN + 40 + row * CELL_H + BOX_H / 2


def _center(box: Box) -> tuple[float, float]:
    return _point(box.col, box.row)


def _edge_point(box: Box, toward: tuple[float, float]) -> tuple[float, float]:
    """Where the line from ``box``'s centre toward a point leaves the box's rectangle."""
    cx, cy = _center(box)
    dx, dy = toward[0] - cx, toward[1] - cy
    if dx == 0 and dy == 0:
        return cx, cy
    scale = min(
        (BOX_W / 2) / abs(dx) if dx else float("inf"),
        (BOX_H / 2) / abs(dy) if dy else float("inf"),
    )
    return cx + dx * scale, cy + dy * scale


def _box_svg(box: Box) -> str:
    cx, cy = _center(box)
    lines = box.label.split("\n")
    parts = [
        f'<rect x="{cx - BOX_W / 2:.0f}" y="{cy - BOX_H / 2:.0f}" width="{BOX_W}" '
        f'height="{BOX_H}" rx="9" fill="{GROUP_FILL[box.group]}" stroke="#5b6472"/>'
    ]
    first = cy - (len(lines) - 1) * 8 + 4
    for index, line in enumerate(lines):
        weight = ' font-weight="600"' if index == 0 else ""
        parts.append(
            f'<text x="{cx:.0f}" y="{first + index * 16:.0f}" text-anchor="middle"{weight}>'
            f"{escape(line)}</text>"
        )
    return "\n".join(parts)


def _arrow_svg(arrow: Arrow, boxes: dict[str, Box]) -> str:
    source, target = boxes[arrow.source], boxes[arrow.target]
    bends = [_point(col, row) for col, row in arrow.via]
    start = _edge_point(source, bends[0] if bends else _center(target))
    end = _edge_point(target, bends[-1] if bends else _center(source))
    points = [start, *bends, end]
    dash = ' stroke-dasharray="5 4"' if arrow.dashed else ""
    path = " ".join(f"{x:.0f},{y:.0f}" for x, y in points)
    parts = [
        f'<polyline points="{path}" fill="none" stroke="#3b4350" stroke-width="1.4" '
        f'marker-end="url(#head)"{dash}/>'
    ]
    if arrow.label:
        middle = (len(points) - 1) // 2
        (x1, y1), (x2, y2) = points[middle], points[middle + 1]
        mx, my = (x1 + x2) / 2, (y1 + y2) / 2
        width = len(arrow.label) * CHAR_W * 0.85 + 8
        parts.append(
            f'<rect x="{mx - width / 2:.0f}" y="{my - 9:.0f}" width="{width:.0f}" height="16" '
            'rx="3" fill="#ffffff" opacity="0.9"/>'
        )
        parts.append(
            f'<text x="{mx:.0f}" y="{my + 3:.0f}" text-anchor="middle" font-size="11" '
            f'fill="#3b4350">{escape(arrow.label)}</text>'
        )
    return "\n".join(parts)


def render_svg(diagram: Diagram) -> str:
    """The diagram as a standalone SVG document."""
    boxes = {box.id: box for box in diagram.boxes}
    width = MARGIN * 2 + (max(b.col for b in diagram.boxes) + 1) * CELL_W - (CELL_W - BOX_W)
    height = MARGIN * 2 + 40 + (max(b.row for b in diagram.boxes) + 1) * CELL_H
    body = [_arrow_svg(arrow, boxes) for arrow in diagram.arrows]
    body += [_box_svg(box) for box in diagram.boxes]
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="Helvetica, Arial, sans-serif" '
        'font-size="12.5" fill="#1d2430">\n'
        '<defs><marker id="head" viewBox="0 0 10 10" refX="10" refY="5" '
        'markerWidth="8" markerHeight="8" orient="auto-start-reverse">'
        '<path d="M0,0 L10,5 L0,10 z" fill="#3b4350"/></marker></defs>\n'
        f'<rect width="100%" height="100%" fill="#ffffff"/>\n'
        f'<text x="{MARGIN}" y="{MARGIN + 8}" font-size="16" font-weight="600">'
        f"{escape(diagram.title)}</text>\n" + "\n".join(body) + "\n</svg>\n"
    )


# --- Mermaid ------------------------------------------------------------------------------


def render_mermaid(diagram: Diagram) -> str:
    """The same diagram as a Mermaid flowchart (what GitHub draws from the page)."""
    lines = ["```mermaid", f"flowchart {diagram.direction}"]
    for box in diagram.boxes:
        label = box.label.replace('"', "'").replace("\n", "<br/>")
        lines.append(f'    {box.id}["{label}"]')
    for arrow in diagram.arrows:
        link = "-.->" if arrow.dashed else "-->"
        label = f"|{arrow.label.replace('|', '/')}|" if arrow.label else ""
        lines.append(f"    {arrow.source} {link}{label} {arrow.target}")
    lines.append("```")
    return "\n".join(lines)


def page_with_blocks(page: str) -> str:
    """``page`` with each ``<!-- diagram:NAME -->`` … ``<!-- /diagram -->`` block redrawn."""
    for diagram in DIAGRAMS:
        start, end = f"<!-- diagram:{diagram.name} -->", "<!-- /diagram -->"
        before, found, rest = page.partition(start)
        if not found:
            raise SystemExit(f"{PAGE}: no {start} marker")
        _old, found_end, after = rest.partition(end)
        if not found_end:
            raise SystemExit(f"{PAGE}: {start} is not closed by {end}")
        page = f"{before}{start}\n{render_mermaid(diagram)}\n{end}{after}"
    return page


def outputs() -> dict[Path, str]:
    """Every file this script writes, with its content."""
    files = {IMAGES / f"architecture-{d.name}.svg": render_svg(d) for d in DIAGRAMS}
    files[PAGE] = page_with_blocks(PAGE.read_text(encoding="utf-8"))
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when anything is stale")
    args = parser.parse_args(argv)
    stale = []
    for path, content in outputs().items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == content:
            continue
        stale.append(path)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
            print(f"wrote {path.relative_to(REPO_ROOT)}")
    if args.check and stale:
        names = ", ".join(str(path.relative_to(REPO_ROOT)) for path in stale)
        print(f"stale: {names}; run python scripts/architecture_diagram.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
