#!/usr/bin/env python3
"""Writes the example SQLite dataset that mst-plugin-acmesql reads.

Usage: python3 make_db.py PATH   (such as cases.db next to eval.yaml)
"""

import json
import sqlite3
import sys

ROWS = [
    ("oslo", "What is the forecast for Oslo?", [{"answerContains": "Oslo"}], {"region": "europe", "priority": 1}, "smoke"),
    ("tokyo", "東京の天気は？", None, {"region": "asia"}, "smoke"),
    ("lima", "Will it rain in Lima tomorrow?", None, None, "full"),
]


def main(path):
    db = sqlite3.connect(path)
    with db:
        db.execute("DROP TABLE IF EXISTS cases")
        db.execute("CREATE TABLE cases (id TEXT PRIMARY KEY, input TEXT NOT NULL, expect TEXT, metadata TEXT, tag TEXT)")
        db.executemany(
            "INSERT INTO cases VALUES (?, ?, ?, ?, ?)",
            [(i, inp, e and json.dumps(e), m and json.dumps(m), tag) for i, inp, e, m, tag in ROWS],
        )
    db.close()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_db.py PATH")
    main(sys.argv[1])
