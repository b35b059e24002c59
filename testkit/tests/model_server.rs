//! The scripted model server, first at the protocol level with a plain HTTP client, then
//! driving the real Claude Code CLI (when installed; required in CI).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use specbridge_testkit::model_server::{
    ModelServer, Reply, Script, ServerOptions, SideRequest, ToolCall,
};

// ---------------------------------------------------------------------------------------------
// A minimal HTTP/1.1 client: enough for one request per connection, no network needed.

struct HttpReply {
    status: u16,
    headers: BTreeMap<String, String>,
    body: String,
}

fn send(
    server: &ModelServer,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> std::io::Result<HttpReply> {
    send_with_timeout(server.port(), method, path, body, Duration::from_secs(30))
}

fn send_with_timeout(
    port: u16,
    method: &str,
    path: &str,
    body: Option<&Value>,
    timeout: Duration,
) -> std::io::Result<HttpReply> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(timeout))?;
    let payload = body.map(Value::to_string).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\
         x-api-key: sk-test\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{payload}",
        payload.len()
    )?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let raw = String::from_utf8(raw).expect("utf-8 reply");
    let (head, body) = raw.split_once("\r\n\r\n").expect("a complete reply head");
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .expect("a status line");
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    Ok(HttpReply {
        status,
        headers,
        body: body.to_owned(),
    })
}

fn post_messages(server: &ModelServer, body: Value) -> HttpReply {
    send(server, "POST", "/v1/messages?beta=true", Some(&body)).expect("request answered")
}

fn model_request() -> Value {
    json!({
        "model": "claude-opus-5-5",
        "max_tokens": 32000,
        "stream": true,
        "tools": [{"name": "Read", "input_schema": {}}, {"name": "Write", "input_schema": {}}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "do the task"}]}],
    })
}

fn sse_events(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter(|chunk| !chunk.trim().is_empty())
        .map(|chunk| {
            let field = |prefix: &str| {
                chunk
                    .lines()
                    .find_map(|line| line.strip_prefix(prefix))
                    .unwrap_or_else(|| panic!("no {prefix} in event {chunk:?}"))
                    .to_owned()
            };
            let data: Value = serde_json::from_str(&field("data: ")).expect("JSON data");
            (field("event: "), data)
        })
        .collect()
}

/// Content blocks rebuilt from the deltas, as a streaming client does.
fn reassemble(events: &[(String, Value)]) -> Vec<Value> {
    let mut blocks: Vec<Value> = Vec::new();
    let mut partial_json: Vec<String> = Vec::new();
    for (name, data) in events {
        match name.as_str() {
            "content_block_start" => {
                blocks.push(data["content_block"].clone());
                partial_json.push(String::new());
            }
            "content_block_delta" => {
                let index = data["index"].as_u64().unwrap() as usize;
                let delta = &data["delta"];
                match delta["type"].as_str().unwrap() {
                    "text_delta" => {
                        let text = blocks[index]["text"].as_str().unwrap().to_owned()
                            + delta["text"].as_str().unwrap();
                        blocks[index]["text"] = json!(text);
                    }
                    "input_json_delta" => {
                        partial_json[index].push_str(delta["partial_json"].as_str().unwrap());
                    }
                    other => panic!("unexpected delta {other}"),
                }
            }
            "content_block_stop" => {
                let index = data["index"].as_u64().unwrap() as usize;
                if blocks[index]["type"] == "tool_use" {
                    blocks[index]["input"] =
                        serde_json::from_str(&partial_json[index]).expect("input JSON");
                }
            }
            _ => {}
        }
    }
    blocks
}

fn event_names(events: &[(String, Value)]) -> Vec<&str> {
    let mut names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    names.dedup();
    names
}

// ---------------------------------------------------------------------------------------------
// Protocol level

#[test]
fn text_reply_streams_a_complete_message_with_usage() {
    let server = ModelServer::start(Script::new([Reply::text("The answer is 42.")]));
    let reply = post_messages(&server, model_request());

    assert_eq!(reply.status, 200);
    assert_eq!(reply.headers["content-type"], "text/event-stream");
    let events = sse_events(&reply.body);
    assert_eq!(
        event_names(&events),
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    let start = &events[0].1["message"];
    assert_eq!(start["model"], "claude-opus-5-5");
    assert_eq!(start["usage"]["input_tokens"], 100);
    assert_eq!(
        reassemble(&events),
        [json!({"type": "text", "text": "The answer is 42."})]
    );
    let delta = &events[events.len() - 2].1;
    assert_eq!(delta["delta"]["stop_reason"], "end_turn");
    assert_eq!(delta["usage"]["output_tokens"], 20);
    assert_eq!(server.remaining(), 0);
}

#[test]
fn tool_use_reply_streams_input_json_deltas_that_reassemble_to_the_input() {
    let write_input = json!({"file_path": "notes/a.txt", "content": "line one\nline two ✓\n"});
    let read_input = json!({"file_path": "README.md"});
    let server = ModelServer::start(Script::new([
        Reply::tool_uses(
            Some("Writing both.".into()),
            vec![
                ToolCall::new("Write", write_input.clone()).with_id("toolu_fixed"),
                ToolCall::new("Read", read_input.clone()),
            ],
        )
        .with_usage(1234, 56),
        Reply::structured_output(json!({"summary": "done", "count": 2})),
    ]));

    let events = sse_events(&post_messages(&server, model_request()).body);
    let blocks = reassemble(&events);
    assert_eq!(blocks.len(), 3);
    assert_eq!(blocks[0], json!({"type": "text", "text": "Writing both."}));
    assert_eq!(blocks[1]["id"], "toolu_fixed");
    assert_eq!(blocks[1]["name"], "Write");
    assert_eq!(blocks[1]["input"], write_input);
    assert_eq!(blocks[2]["name"], "Read");
    assert_eq!(blocks[2]["input"], read_input);
    assert!(blocks[2]["id"].as_str().unwrap().starts_with("toolu_"));
    let input_deltas = events
        .iter()
        .filter(|(_, data)| data["delta"]["type"] == "input_json_delta")
        .count();
    assert!(input_deltas > 2, "input should arrive in pieces");
    assert_eq!(events[0].1["message"]["usage"]["input_tokens"], 1234);
    let delta = &events[events.len() - 2].1;
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert_eq!(delta["usage"]["output_tokens"], 56);

    let blocks = reassemble(&sse_events(&post_messages(&server, model_request()).body));
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0]["name"], "StructuredOutput");
    assert_eq!(blocks[0]["input"], json!({"summary": "done", "count": 2}));
}

#[test]
fn non_streaming_requests_get_one_json_message() {
    let server = ModelServer::start(Script::new([Reply::tool_use(
        "Read",
        json!({"file_path": "x"}),
    )]));
    let mut body = model_request();
    body["stream"] = json!(false);
    let reply = post_messages(&server, body);
    let message: Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(message["stop_reason"], "tool_use");
    assert_eq!(message["content"][0]["input"], json!({"file_path": "x"}));
}

#[test]
fn error_replies_carry_status_body_and_headers() {
    let server = ModelServer::start(Script::new([
        Reply::error(401).with_header("x-should-retry", "false"),
        Reply::error(529)
            .with_body(json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}))
            .with_header("retry-after", "0"),
        Reply::error(502).with_body(json!("<html>bad gateway</html>")),
    ]));

    let unauthorized = post_messages(&server, model_request());
    assert_eq!(unauthorized.status, 401);
    assert_eq!(unauthorized.headers["x-should-retry"], "false");
    let body: Value = serde_json::from_str(&unauthorized.body).unwrap();
    assert_eq!(body["error"]["type"], "authentication_error");

    let overloaded = post_messages(&server, model_request());
    assert_eq!(overloaded.status, 529);
    assert_eq!(overloaded.headers["retry-after"], "0");
    let body: Value = serde_json::from_str(&overloaded.body).unwrap();
    assert_eq!(body["error"]["message"], "Overloaded");

    let raw = post_messages(&server, model_request());
    assert_eq!(raw.status, 502);
    assert_eq!(raw.body, "<html>bad gateway</html>");
}

#[test]
fn side_requests_are_answered_without_consuming_the_script() {
    let server = ModelServer::start(Script::new([Reply::text("first"), Reply::text("second")]));
    let with = |patch: Value| {
        let mut body = model_request();
        for (key, value) in patch.as_object().unwrap() {
            body[key] = value.clone();
        }
        body
    };

    assert_eq!(
        send(&server, "HEAD", "/api/hello", None).unwrap().status,
        200
    );
    let haiku = post_messages(&server, with(json!({"model": "claude-haiku-4-5-20251001"})));
    assert_eq!(
        reassemble(&sse_events(&haiku.body))[0]["text"],
        "OK",
        "side answers are fixed"
    );
    post_messages(&server, with(json!({"max_tokens": 1})));
    post_messages(
        &server,
        with(json!({"messages": [{"role": "user", "content": "Warmup"}]})),
    );
    let title = post_messages(
        &server,
        with(json!({
            "tools": [],
            "output_config": {"format": {"type": "json_schema", "schema": {
                "type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}}},
        })),
    );
    let title_text = reassemble(&sse_events(&title.body))[0]["text"].clone();
    let title_json: Value = serde_json::from_str(title_text.as_str().unwrap()).unwrap();
    assert!(title_json["title"].is_string());
    let count = send(
        &server,
        "POST",
        "/v1/messages/count_tokens?beta=true",
        Some(&model_request()),
    )
    .unwrap();
    assert_eq!(count.status, 200);
    assert_eq!(
        send(&server, "GET", "/v1/unknown", None).unwrap().status,
        404
    );
    assert_eq!(server.remaining(), 2);

    let main = post_messages(&server, model_request());
    assert_eq!(reassemble(&sse_events(&main.body))[0]["text"], "first");
    assert_eq!(server.remaining(), 1);

    let sides: Vec<Option<SideRequest>> = server.requests().iter().map(|r| r.side).collect();
    assert_eq!(
        sides,
        [
            Some(SideRequest::Probe),
            Some(SideRequest::SmallModel),
            Some(SideRequest::TokenProbe),
            Some(SideRequest::Warmup),
            Some(SideRequest::FormatQuery),
            Some(SideRequest::CountTokens),
            Some(SideRequest::Unknown),
            None,
        ]
    );
    assert_eq!(server.model_requests().len(), 1);
    assert_eq!(server.model_requests()[0].step, Some(0));
}

#[test]
fn repeats_then_exhaustion_fails_loudly() {
    let server = ModelServer::start(Script::new([
        Reply::error(529).repeated(2),
        Reply::text("recovered"),
    ]));
    let statuses: Vec<u16> = (0..4)
        .map(|_| post_messages(&server, model_request()).status)
        .collect();
    assert_eq!(statuses, [529, 529, 200, 500]);

    let last = post_messages(&server, model_request());
    assert_eq!(last.headers["x-should-retry"], "false");
    assert!(last.body.contains("script is exhausted"), "{}", last.body);
    let steps: Vec<Option<usize>> = server.requests().iter().map(|r| r.step).collect();
    assert_eq!(steps, [Some(0), Some(0), Some(1), None, None]);
    assert_eq!(server.remaining(), 0);
}

#[test]
fn forever_never_runs_out() {
    let server = ModelServer::start(Script::new([Reply::tool_use(
        "Write",
        json!({"file_path": "x", "content": ""}),
    )
    .forever()]));
    for _ in 0..5 {
        assert_eq!(post_messages(&server, model_request()).status, 200);
    }
    assert_eq!(server.remaining(), 1);
}

#[test]
fn request_log_shows_what_the_model_was_shown() {
    let log_dir = tempfile::tempdir().unwrap();
    let log_path = log_dir.path().join("requests.jsonl");
    let server = ModelServer::start_with(
        Script::new([Reply::text("a"), Reply::text("b")]),
        ServerOptions {
            port: 0,
            log_path: Some(log_path.clone()),
        },
    )
    .unwrap();
    post_messages(&server, model_request());
    let mut follow_up = model_request();
    follow_up["messages"] = json!([
        {"role": "user", "content": "do the task"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Write", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": true,
             "content": "<tool_use_error>No such tool available: Write</tool_use_error>"}
        ]},
    ]);
    post_messages(&server, follow_up);

    let requests = server.requests();
    assert_eq!(requests[0].tool_names(), ["Read", "Write"]);
    assert!(requests[0].tool_results().is_empty());
    let results = requests[1].tool_results();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].tool_use_id, "toolu_1");
    assert!(results[0].is_error);
    assert!(results[0].text().contains("No such tool available"));
    assert_eq!(requests[1].headers["x-api-key"], "<redacted>");
    assert_eq!(requests[1].path, "/v1/messages?beta=true");

    let logged: Vec<Value> = std::fs::read_to_string(&log_path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(logged.len(), 2);
    assert_eq!(logged[1], serde_json::to_value(&requests[1]).unwrap());
}

#[test]
fn a_delayed_reply_stalls_past_a_client_timeout() {
    let server = ModelServer::start(Script::new([Reply::text("late").with_delay_ms(600_000)]));
    let outcome = send_with_timeout(
        server.port(),
        "POST",
        "/v1/messages",
        Some(&model_request()),
        Duration::from_millis(300),
    );
    let err = outcome.err().expect("the reply is held back");
    assert!(
        matches!(
            err.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
        "{err}"
    );
    // Received and logged even though it was never answered; dropping must not wait for it.
    assert_eq!(server.requests().len(), 1);
    assert_eq!(server.remaining(), 0);
}

#[test]
fn binary_serves_a_yaml_script_and_writes_port_and_log_files() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.yaml");
    std::fs::write(
        &script,
        "replies:\n  - type: text\n    text: from the binary\n",
    )
    .unwrap();
    let port_file = dir.path().join("port");
    let log = dir.path().join("log.jsonl");
    let child = Command::new(env!("CARGO_BIN_EXE_scripted-model-server"))
        .arg("--script")
        .arg(&script)
        .arg("--port-file")
        .arg(&port_file)
        .arg("--log")
        .arg(&log)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let child = KillOnDrop(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    let port: u16 = loop {
        if let Ok(text) = std::fs::read_to_string(&port_file) {
            break text.trim().parse().expect("a port number");
        }
        assert!(Instant::now() < deadline, "no port file written");
        std::thread::sleep(Duration::from_millis(20));
    };
    let reply = send_with_timeout(
        port,
        "POST",
        "/v1/messages?beta=true",
        Some(&model_request()),
        Duration::from_secs(30),
    )
    .unwrap();
    assert_eq!(
        reassemble(&sse_events(&reply.body))[0]["text"],
        "from the binary"
    );
    drop(child);
    let logged = std::fs::read_to_string(&log).unwrap();
    let entry: Value = serde_json::from_str(logged.lines().next().unwrap()).unwrap();
    assert_eq!(entry["step"], 0);
    assert_eq!(entry["body"]["model"], "claude-opus-5-5");
}

#[test]
fn binary_rejects_a_broken_script() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(&script, r#"[{"type": "txt", "text": "typo"}]"#).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_scripted-model-server"))
        .arg("--script")
        .arg(&script)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("failed to parse script"), "{stderr}");
    assert!(stderr.contains("txt"), "{stderr}");
}

struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// Against the real CLI

const CLAUDE_VERSION: &str = "2.1.332";

/// The installed CLI; `None` (skip) outside CI when it is missing, a failure in CI.
fn claude_bin() -> Option<PathBuf> {
    let path = std::env::var_os("SPECBRIDGE_CLAUDE_BIN")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|home| {
                PathBuf::from(home).join(format!(
                    ".cache/specbridge/claude-code-{CLAUDE_VERSION}/node_modules/.bin/claude"
                ))
            })
        });
    match path {
        Some(path) if path.exists() => Some(path),
        other => {
            let message = format!(
                "real Claude Code CLI not found at {other:?}; install it with .ci/install-claude-code \
                 or set SPECBRIDGE_CLAUDE_BIN"
            );
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("{message}");
            }
            eprintln!("skipping: {message}");
            None
        }
    }
}

struct ClaudeRun {
    success: bool,
    envelope: Value,
    stdout: String,
}

/// A fresh git repository and HOME for one run of the CLI against `server`.
struct Sandbox {
    home: tempfile::TempDir,
    repo: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        let sandbox = Sandbox {
            home: tempfile::tempdir().unwrap(),
            repo: tempfile::tempdir().unwrap(),
        };
        let status = Command::new("git")
            .args(["init", "-q", "."])
            .current_dir(sandbox.repo.path())
            .status()
            .expect("git is installed");
        assert!(status.success());
        sandbox
    }

    fn repo(&self) -> &Path {
        self.repo.path()
    }

    fn run(&self, claude: &Path, server: &ModelServer, prompt: &str, args: &[&str]) -> ClaudeRun {
        let mut child = Command::new(claude)
            .args(["-p", "--output-format", "stream-json", "--verbose"])
            .args(args)
            .current_dir(self.repo.path())
            // Nothing from the developer's environment may redirect the CLI elsewhere.
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home.path())
            .env("ANTHROPIC_BASE_URL", server.base_url())
            .env("ANTHROPIC_API_KEY", "sk-test")
            .env("CLAUDE_CODE_MAX_RETRIES", "1")
            .env("DISABLE_TELEMETRY", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("DISABLE_ERROR_REPORTING", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the CLI starts");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(prompt.as_bytes())
            .unwrap();
        let child = wait_bounded(child, Duration::from_secs(180));
        let stdout = String::from_utf8_lossy(&child.stdout).into_owned();
        let envelope = stdout
            .lines()
            .rev()
            .find_map(|line| {
                serde_json::from_str::<Value>(line)
                    .ok()
                    .filter(|event| event["type"] == "result")
            })
            .unwrap_or_else(|| {
                panic!(
                    "no result envelope; stdout:\n{stdout}\nstderr:\n{}",
                    String::from_utf8_lossy(&child.stderr)
                )
            });
        ClaudeRun {
            success: child.status.success(),
            envelope,
            stdout,
        }
    }
}

/// Waits for the CLI, killing it after a generous bound so a regression cannot hang the suite.
fn wait_bounded(mut child: std::process::Child, bound: Duration) -> std::process::Output {
    let deadline = Instant::now() + bound;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the CLI did not finish within {bound:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn real_cli_text_answer_gives_a_success_envelope() {
    let Some(claude) = claude_bin() else { return };
    let server = ModelServer::start(Script::new([Reply::text("All done here.")]));
    let run = Sandbox::new().run(&claude, &server, "say something", &["--max-turns", "3"]);

    assert!(run.success, "{}", run.stdout);
    assert_eq!(run.envelope["subtype"], "success");
    assert_eq!(run.envelope["is_error"], false);
    assert_eq!(run.envelope["result"], "All done here.");
    assert!(run.envelope["total_cost_usd"].as_f64().unwrap() > 0.0);
    let model_requests = server.model_requests();
    assert_eq!(model_requests.len(), 1);
    let first_message = model_requests[0].body["messages"][0].to_string();
    assert!(first_message.contains("say something"));
    assert_eq!(server.remaining(), 0);
}

#[test]
fn real_cli_runs_a_scripted_write_and_returns_its_result_to_the_model() {
    let Some(claude) = claude_bin() else { return };
    let sandbox = Sandbox::new();
    let target = sandbox.repo().join("notes.txt");
    let server = ModelServer::start(Script::new([
        Reply::tool_uses(
            Some("Writing the notes.".into()),
            vec![ToolCall::new(
                "Write",
                json!({"file_path": target, "content": "scripted content\n"}),
            )
            .with_id("toolu_write_1")],
        ),
        Reply::text("Wrote notes.txt."),
    ]));
    let run = sandbox.run(
        &claude,
        &server,
        "write the notes",
        &[
            "--max-turns",
            "3",
            "--permission-mode",
            "acceptEdits",
            "--allowedTools",
            "Write",
        ],
    );

    assert!(run.success, "{}", run.stdout);
    assert_eq!(run.envelope["result"], "Wrote notes.txt.");
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "scripted content\n"
    );
    let model_requests = server.model_requests();
    assert_eq!(model_requests.len(), 2);
    assert!(model_requests[0].tool_names().contains(&"Write".to_owned()));
    let results = model_requests[1].tool_results();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].tool_use_id, "toolu_write_1");
    assert!(!results[0].is_error, "{:?}", results[0]);
}

#[test]
fn real_cli_structured_output_tool_call_yields_structured_output() {
    let Some(claude) = claude_bin() else { return };
    let schema = json!({
        "type": "object",
        "properties": {"summary": {"type": "string"}, "count": {"type": "integer"}},
        "required": ["summary", "count"],
    });
    let answer = json!({"summary": "two files", "count": 2});
    let server = ModelServer::start(Script::new([Reply::structured_output(answer.clone())]));
    let run = Sandbox::new().run(
        &claude,
        &server,
        "summarise",
        &["--max-turns", "3", "--json-schema", &schema.to_string()],
    );

    assert!(run.success, "{}", run.stdout);
    assert_eq!(run.envelope["structured_output"], answer);
    assert!(server.model_requests()[0]
        .tool_names()
        .contains(&"StructuredOutput".to_owned()));
}

#[test]
fn real_cli_gives_up_at_once_on_401_that_must_not_be_retried() {
    let Some(claude) = claude_bin() else { return };
    let server = ModelServer::start(Script::new([Reply::error(401)
        .with_header("x-should-retry", "false")
        .forever()]));
    let run = Sandbox::new().run(&claude, &server, "hello", &["--max-turns", "3"]);

    assert!(!run.success);
    assert_eq!(run.envelope["is_error"], true);
    assert_eq!(run.envelope["api_error_status"], 401);
    assert_eq!(run.envelope["terminal_reason"], "api_error");
    assert_eq!(server.model_requests().len(), 1, "no retry expected");
}
