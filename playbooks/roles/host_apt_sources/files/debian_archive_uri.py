#!/usr/bin/python3
"""Print, as JSON, the URI and signing key of the Debian archive in this machine's apt sources.

The archive is the entry whose suites include the release codename (argv[1]) with the
`main` component; its URI is whatever this machine uses (a mirror, a proxy, a snapshot).
"""
import glob
import json
import re
import sys

codename = sys.argv[1]
found = []
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")) + ["/etc/apt/sources.list"]:
    try:
        text = open(path).read()
    except OSError:
        continue
    if path.endswith(".sources"):
        for stanza in re.split(r"\n\s*\n", text):
            fields = {}
            for line in stanza.splitlines():
                if line.startswith("#") or ":" not in line or line[0].isspace():
                    continue
                key, value = line.split(":", 1)
                fields[key.strip().lower()] = value.split()
            if ("deb" in fields.get("types", []) and codename in fields.get("suites", [])
                    and "main" in fields.get("components", [])
                    and fields.get("enabled", ["yes"])[0] != "no"):
                found += [{"uri": u, "signed_by": " ".join(fields.get("signed-by", [])),
                           "source": path} for u in fields.get("uris", [])]
    else:
        for line in text.splitlines():
            m = re.match(r"^\s*deb\s+(\[[^\]]*\]\s+)?(\S+)\s+(\S+)\s+(.*)$", line)
            if m and m.group(3) == codename and "main" in m.group(4).split():
                opts = m.group(1) or ""
                sb = re.search(r"signed-by=(\S+?)\]?(\s|$)", opts)
                found.append({"uri": m.group(2), "signed_by": sb.group(1) if sb else "",
                              "source": path})
if not found:
    sys.exit(f"no 'deb' entry for suite {codename} with component main in this machine's "
             "apt sources: add the Debian archive to /etc/apt/sources.list.d first")
print(json.dumps(found[0]))
