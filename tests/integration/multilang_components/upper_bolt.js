// A Storm multilang bolt in Node.js, protocol by hand: (seq, key) -> (seq, KEY).
const fs = require("fs");
const path = require("path");
const readline = require("readline");

function send(msg) { process.stdout.write(JSON.stringify(msg) + "\nend\n"); }

let lines = [];
let handshaken = false;
readline.createInterface({ input: process.stdin }).on("line", (line) => {
  if (line !== "end") { lines.push(line); return; }
  const msg = JSON.parse(lines.join("\n"));
  lines = [];
  if (!handshaken) {
    handshaken = true;
    fs.writeFileSync(path.join(msg.pidDir, String(process.pid)), "");
    send({ pid: process.pid });
    send({ command: "log", msg: "node bolt ready, task " + msg.context.taskid, level: 2 });
    return;
  }
  if (Array.isArray(msg)) return;  // task ids of an emit: not asked for
  if (msg.stream === "__heartbeat") { send({ command: "sync" }); return; }
  const [seq, key] = msg.tuple;
  send({ command: "emit", anchors: [msg.id], tuple: [seq, "node:" + key.toUpperCase()],
         need_task_ids: false });
  send({ command: "ack", id: msg.id });
});
