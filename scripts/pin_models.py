#!/usr/bin/env python3
"""Pins model manifests to what the Hugging Face hub holds now: a commit and each file's hash.

Usage: pin_models.py [--endpoint URL] MANIFEST.toml...

For each manifest (models/*.toml) this asks the hub for the commit its `revision` names now and
for the files of that commit (GET {endpoint}/api/models/{repo}/revision/{revision}?blobs=true),
and writes into the manifest:
- `revision = "<commit>"`, so that every install downloads the same files, whatever the
  repository's owner pushes later;
- each listed file's `sha256` and `size_bytes`. A Git LFS file's come from the hub's own
  metadata (its LFS object id is the SHA-256 of the contents); a plain git file (config.json,
  vocab.txt) is downloaded at that commit and hashed here, since the hub gives only its git blob
  id for it. The downloader then refuses any file whose bytes do not match.

A required file that the commit does not hold is an error; an optional one is left unpinned and
said. The endpoint is $HF_ENDPOINT or https://huggingface.co; $HF_TOKEN is sent for gated
repositories. Lines starting with "# unpinned:" are dropped from a manifest once it is pinned.
Run it from a machine that reaches the hub, review the diff, commit it.
"""

import argparse
import datetime
import hashlib
import json
import os
import re
import sys
import tomllib
import urllib.parse
import urllib.request


def get(url, token):
    request = urllib.request.Request(url, headers={"User-Agent": "selfrag-desktop pin_models.py"})
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    return urllib.request.urlopen(request, timeout=60)


def pins(endpoint, manifest, token):
    """(commit, {file name: (sha256, size)}, [notes]) for a parsed manifest."""
    repo, revision = manifest["repo"], manifest["revision"]
    quoted = urllib.parse.quote(revision, safe="")
    with get(f"{endpoint}/api/models/{repo}/revision/{quoted}?blobs=true", token) as reply:
        info = json.load(reply)
    commit = info["sha"]
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise SystemExit(f"{repo}: the hub named the commit {commit!r}, which is not a commit id")
    siblings = {s["rfilename"]: s for s in info.get("siblings", [])}
    found, notes = {}, []
    for file in manifest["files"]:
        name = file["name"]
        sibling = siblings.get(name)
        if sibling is None:
            if file.get("required", True):
                raise SystemExit(f"{repo}@{commit}: the required file {name} is not in the repository")
            notes.append(f"{repo}: the optional file {name} is not in the repository; left unpinned")
            continue
        lfs = sibling.get("lfs")
        if lfs:
            found[name] = (lfs["sha256"], int(lfs["size"]))
            continue
        digest, size = hashlib.sha256(), 0
        with get(f"{endpoint}/{repo}/resolve/{commit}/{urllib.parse.quote(name)}", token) as reply:
            while chunk := reply.read(1 << 20):
                digest.update(chunk)
                size += len(chunk)
        if sibling.get("size") is not None and int(sibling["size"]) != size:
            raise SystemExit(f"{repo}@{commit}: {name} is {size} bytes, the hub lists {sibling['size']}")
        found[name] = (digest.hexdigest(), size)
    return commit, found, notes


def rewrite(text, revision, commit, found):
    """The manifest's text with the pins written in, every other line as it was."""
    out, block_file = [], None
    today = datetime.date.today().isoformat()
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("# unpinned:"):
            continue
        if stripped == "[[files]]":
            block_file = ""
        elif stripped.startswith("["):
            block_file = None
        elif block_file is not None and re.match(r"(sha256|size_bytes)\s*=", stripped):
            continue
        elif block_file is None and re.match(r"revision\s*=", stripped):
            line = f'revision = "{commit}" # "{revision}" on {today}, pinned by scripts/pin_models.py'
        out.append(line)
        name = re.match(r"""name\s*=\s*(?:"([^"]+)"|'([^']+)')""", stripped)
        if block_file is not None and name:
            block_file = name.group(1) or name.group(2)
            if block_file in found:
                sha256, size = found[block_file]
                out.append(f'sha256 = "{sha256}"')
                out.append(f"size_bytes = {size}")
    return "\n".join(out) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", default=os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    parser.add_argument("manifests", nargs="+")
    args = parser.parse_args()
    endpoint = args.endpoint.rstrip("/")
    token = os.environ.get("HF_TOKEN")
    for path in args.manifests:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
        manifest = tomllib.loads(text)
        commit, found, notes = pins(endpoint, manifest, token)
        pinned = rewrite(text, manifest["revision"], commit, found)
        check = tomllib.loads(pinned)
        assert check["revision"] == commit, path
        for file in check["files"]:
            if file["name"] in found:
                assert (file["sha256"], file["size_bytes"]) == found[file["name"]], (path, file)
        with open(path, "w", encoding="utf-8") as f:
            f.write(pinned)
        for note in notes:
            print(note, file=sys.stderr)
        print(f"{path}: {manifest['repo']} pinned at {commit}, {len(found)} files")


if __name__ == "__main__":
    main()
