// mcp_sdk_client.cjs - airlock-mcp driven by the official MCP TypeScript
// SDK's client (@modelcontextprotocol/sdk, from npm; deploy/install-deps.sh
// puts it in $AIRLOCK_NODE_DEPS), as an MCP host would: connect over stdio,
// list the tools, call them (a value, a chart as an image, a file back, a
// tool error, live progress, a cancel through an AbortSignal, a ping
// meanwhile), close. Prints one JSON object with what it saw; the Python
// test (client/python/tests/test_mcp_sdk.py) judges it.
//   node mcp_sdk_client.cjs COMMAND [ARGS...]   (the server to start)
const path = require("path");
const deps = process.env.AIRLOCK_NODE_DEPS || "/var/lib/airlock/node-test";
const sdk = (p) => require(path.join(deps, "node_modules", "@modelcontextprotocol", "sdk", "dist", "cjs", p));
const { Client } = sdk("client/index.js");
const { StdioClientTransport } = sdk("client/stdio.js");

async function main() {
  const [command, ...args] = process.argv.slice(2);
  const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
  const client = new Client({ name: "airlock-sdk-test", version: "1.0.0" });
  const seen = {};
  await client.connect(transport);
  seen.server = client.getServerVersion();
  seen.protocol = transport._protocolVersion || null;
  seen.tools = (await client.listTools()).tools.map((t) => ({
    name: t.name, props: Object.keys(t.inputSchema.properties || {}).sort(),
    output: !!t.outputSchema }));
  const text = (r) => r.content.filter((c) => c.type === "text").map((c) => c.text).join("");
  let r = await client.callTool({ name: "run_python", arguments: { code: "print(6 * 7)" } });
  seen.value = { isError: r.isError, stdout: r.structuredContent && r.structuredContent.stdout };
  r = await client.callTool({ name: "run_python", arguments: {
    code: "open('chart.png', 'wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + bytes(range(32)))",
  } });
  seen.image = r.content.filter((c) => c.type === "image").map((c) => ({
    mime: c.mimeType, bytes: Buffer.from(c.data, "base64").length }));
  r = await client.callTool({ name: "run_shell", arguments: {
    command: "wc -c < in.txt > out.txt", files: { "in.txt": "hello" }, collect: ["out.txt"] } });
  seen.resource = r.content.filter((c) => c.type === "resource").map((c) => ({
    uri: c.resource.uri, text: Buffer.from(c.resource.blob, "base64").toString().trim() }));
  r = await client.callTool({ name: "run_python", arguments: { code: 7 } });
  seen.bad = { isError: r.isError, text: text(r) };
  const progress = [];
  r = await client.callTool({ name: "run_python", arguments: {
    code: "import time\nfor i in range(3):\n    print('step', i, flush=True)\n    time.sleep(0.4)" } },
  undefined, { onprogress: (p) => progress.push(p) });
  seen.progress = { count: progress.length, last: progress.length ? progress[progress.length - 1] : null,
    stdout: r.structuredContent && r.structuredContent.stdout };
  const ac = new AbortController();
  const t0 = Date.now();
  const long = client.callTool({ name: "run_shell", arguments: { command: "sleep 30" } },
    undefined, { signal: ac.signal, timeout: 60000 });
  await new Promise((res) => setTimeout(res, 500));
  const ping0 = Date.now();
  await client.ping();
  seen.ping_ms = Date.now() - ping0;
  ac.abort("the user stopped it");
  try {
    await long;
    seen.cancel = { answered: true };
  } catch (e) {
    seen.cancel = { error: String(e), ms: Date.now() - t0 };
  }
  await client.close();
  process.stdout.write(JSON.stringify(seen) + "\n");
}

main().catch((e) => { process.stderr.write("sdk client: " + (e.stack || e) + "\n"); process.exit(1); });
