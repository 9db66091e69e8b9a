// Drives Pyodide for `airlock bench --peers`: one JSON request per line on
// stdin, one JSON reply per line on stdout.
//   {"fresh": true,  "code": "..."}  loadPyodide() for this run, then run code
//   {"fresh": false, "code": "..."}  run code in the one warm instance
// Reply: {"ok": true, "memory": <wasm memory bytes>, "stdout": "..."} or
// {"ok": false, "error": "..."}. The module is loaded from the folder
// named by PYODIDE_DIR (where the bench's set-up ran npm install).
import { createRequire } from "node:module";
import { createInterface } from "node:readline";
import path from "node:path";

const require = createRequire(path.join(process.env.PYODIDE_DIR, "package.json"));
const { loadPyodide } = require("pyodide");

let warm = null;
const rl = createInterface({ input: process.stdin });
for await (const line of rl) {
  const req = JSON.parse(line);
  let reply;
  try {
    let py;
    if (req.fresh) {
      py = await loadPyodide();
    } else {
      warm ??= await loadPyodide();
      py = warm;
    }
    let out = "";
    py.setStdout({ batched: (s) => { out += s + "\n"; } });
    py.runPython(req.code, { globals: py.toPy({}) });
    reply = { ok: true, memory: py._module.HEAP8.length, stdout: out };
  } catch (e) {
    reply = { ok: false, error: String(e) };
  }
  process.stdout.write(JSON.stringify(reply) + "\n");
}
