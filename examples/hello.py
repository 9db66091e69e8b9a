# A small, real program: it reads a CSV given with --file, aggregates it,
# writes a JSON report under /home/user and shows what it cannot reach.
import csv, json, os, socket, statistics

with open("sales.csv", newline="") as f:
    rows = list(csv.DictReader(f))

by_region = {}
for row in rows:
    by_region.setdefault(row["region"], []).append(float(row["amount"]))

report = {region: {"total": sum(v), "mean": round(statistics.mean(v), 2)} for region, v in sorted(by_region.items())}
with open("report.json", "w") as f:
    json.dump(report, f, indent=2)
print(json.dumps(report))

print("cwd:", os.getcwd(), "| files:", sorted(os.listdir(".")))
print("host /etc/passwd visible:", os.path.exists("/etc/passwd"))
try:
    socket.create_connection(("example.com", 80), timeout=1)
    print("network: reachable")
except OSError as e:  # PermissionError, saying why (no network in the sandbox)
    print("network: unreachable ->", type(e).__name__, e)
