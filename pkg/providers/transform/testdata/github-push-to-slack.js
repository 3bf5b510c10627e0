// A GitHub push as a Slack message (Slack's incoming webhook payload).
function transform(request, context) {
  const push = request.body;
  const branch = push.ref.replace(/^refs\/(heads|tags)\//, "");
  const commits = push.commits.length
    ? push.commits.map((c) => `• <${c.url}|${c.id.slice(0, 7)}> ${c.message.split("\n")[0]} (${c.author.name})`)
    : [`• ${push.head_commit ? push.head_commit.message.split("\n")[0] : "no commits"}`];
  return {
    body: {
      text: `${push.pusher.name} pushed to ${push.repository.full_name} ${branch}`,
      blocks: [
        {type: "section", text: {type: "mrkdwn", text: `*${push.pusher.name}* pushed to <${push.compare}|${push.repository.full_name}:${branch}>`}},
        {type: "section", text: {type: "mrkdwn", text: commits.join("\n")}},
      ],
    },
    headers: {"content-type": "application/json"},
  };
}
