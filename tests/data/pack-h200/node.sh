#!/bin/sh
# run on the GPU node: the pack arrives in two parts (64 MiB per call)
set -u
PY=$(command -v python3)
cat /tmp/packcarry/part00 .device/packs-b/part01 > /tmp/pypi-small.pack
LOG=$OUT/node-log.txt
{
echo "== node"; date -u; uname -m; $PY --version; echo "python3: $PY"
ldd --version | head -1; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "uv on PATH=/usr/bin:/bin: $(PATH=/usr/bin:/bin command -v uv || echo none)"
echo "stacklock on PATH=/usr/bin:/bin: $(PATH=/usr/bin:/bin command -v stacklock || echo none)"
sha256sum /tmp/pypi-small.pack
echo "== list"; env -i HOME=/tmp/node PATH=/usr/bin:/bin $PY /tmp/pypi-small.pack list | head -4; echo "rc=$?"
echo "== install"; mkdir -p /tmp/node
s=$(date +%s)
env -i HOME=/tmp/node PATH=/usr/bin:/bin $PY /tmp/pypi-small.pack install --venv /tmp/node/env --report-dir $OUT/report; echo "rc=$? seconds=$(( $(date +%s) - s ))"
echo "== install again"
env -i HOME=/tmp/node PATH=/usr/bin:/bin $PY /tmp/pypi-small.pack install --venv /tmp/node/env --report-dir /tmp/node/report2 > /tmp/again.txt; echo "rc=$?"; head -1 /tmp/again.txt
echo "== validate"
env -i HOME=/tmp/node PATH=/usr/bin:/bin $PY /tmp/pypi-small.pack validate --venv /tmp/node/env --report-dir /tmp/node/report3 > /tmp/validate.txt; echo "rc=$?"; tail -1 /tmp/validate.txt
echo "== imports"; /tmp/node/env/bin/python -c "import requests, rich, attrs, socks; print(requests.__version__, attrs.__version__)"
echo "== tampered"
cp /tmp/pypi-small.pack /tmp/bad.pack
$PY - <<'PYEOF'
import json, zipfile
m = json.loads(zipfile.ZipFile("/tmp/bad.pack").read("manifest.json"))
w = next(x for x in m["members"] if x["path"].startswith("wheels/requests"))
with open("/tmp/bad.pack", "r+b") as f:
    f.seek(w["offset"] + 1000); b = f.read(1); f.seek(w["offset"] + 1000); f.write(bytes([b[0] ^ 1]))
PYEOF
before=$(readlink /tmp/node/env; ls /tmp/node/env.stacklock)
env -i HOME=/tmp/node PATH=/usr/bin:/bin $PY /tmp/bad.pack install --venv /tmp/node/env; echo "rc=$?"
after=$(readlink /tmp/node/env; ls /tmp/node/env.stacklock)
[ "$before" = "$after" ] && echo "venv untouched: $after" | tr '\n' ' '; echo
} > $LOG 2>&1
cat $LOG
