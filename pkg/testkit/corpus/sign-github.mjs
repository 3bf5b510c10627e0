// Signs bodies as GitHub does, with GitHub's own library: the module path
// of @octokit/webhooks-methods is argv[2], the secret argv[3]; stdin is a
// JSON array of bodies (strings), stdout the JSON array of their
// X-Hub-Signature-256 values, in the same order. (Used by sign.go.)
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const { sign } = await import(pathToFileURL(process.argv[2]).href);
const bodies = JSON.parse(readFileSync(0, "utf8"));
const out = [];
for (const body of bodies) {
  out.push(await sign(process.argv[3], body));
}
process.stdout.write(JSON.stringify(out));
