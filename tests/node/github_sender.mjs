// Signs deliveries as GitHub signs them, with octokit's own signing (@octokit/webhooks-methods), over
// GitHub's example payloads (@octokit/webhooks-examples). Reads one JSON request on stdin:
//   {"secret": "...", "event": "issues", "action": "opened", "form": false, "patch": {...}}
// ("patch" is merged into the example's top level, so two deliveries can differ) and prints {"body": "<the raw body>", "signature": "sha256=...", "content_type": "..."}.
// "form": true sends the payload as GitHub's application/x-www-form-urlencoded deliveries do.
import { createRequire } from "node:module";
import { sign, verify } from "@octokit/webhooks-methods";

const require = createRequire(import.meta.url);
const examples = require("@octokit/webhooks-examples");

let input = "";
for await (const chunk of process.stdin) input += chunk;
const request = JSON.parse(input);
const group = examples.find((g) => g.name === request.event);
if (!group) throw new Error(`no example of event ${request.event}`);
const example = group.examples.find((e) => !request.action || e.action === request.action);
if (!example) throw new Error(`no example of ${request.event}.${request.action}`);
const json = JSON.stringify({ ...example, ...(request.patch || {}) });
const body = request.form ? `payload=${encodeURIComponent(json)}` : json;
const signature = await sign(request.secret, body);
if (!(await verify(request.secret, body, signature))) throw new Error("octokit cannot verify its own signature");
const content_type = request.form ? "application/x-www-form-urlencoded" : "application/json";
process.stdout.write(JSON.stringify({ body, signature, content_type }));
