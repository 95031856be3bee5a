"""`specviz share`: one recorded session as one HTML page that anyone can open in a browser, no network needed."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from specviz_core.cli.options import add_db_arg, refuse_overwriting


def add_parser(sub: Any) -> None:
    s = sub.add_parser("share", help="write a session as one self-contained HTML page that replays it in a browser",
                       description="Write one recorded session as one HTML file that needs nothing but a browser "
                       "(no network, no SpecViz): the draft tree of every cycle, why it stopped, the tree attention "
                       "mask, the KV trim, the output coloured by how each token was committed, the charts and a "
                       "timeline; Left/Right, Home/End, Space to play, P for a presentation layout.")
    add_db_arg(s)
    s.add_argument("--session", default=None, help="session id (default: the latest)")
    s.add_argument("--out", type=Path, required=True, help="the page to write (e.g. session.html)")


def cmd_share(args: argparse.Namespace) -> int:
    from specviz_core.share.page import share

    refuse_overwriting(args.out, [args.db])
    page = share(args.db, args.out, args.session)
    print(f"wrote {page.path} (session {page.session_id}, {page.n_cycles} cycles, {page.size_bytes / 1e6:.2f} MB): "
          "open it in any browser")
    return 0
