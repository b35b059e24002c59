//! A scripted stand-in for the Anthropic Messages API, for driving a real agent CLI in tests.
//!
//! Point the agent at [`ModelServer::base_url`] through `ANTHROPIC_BASE_URL`. Each model
//! request takes the next [`Reply`] of the [`Script`]; side requests (probes, small-model
//! helpers, titles, warm-ups) get a fixed answer and leave the script alone. Every request is
//! recorded so tests can assert what the model was shown.

mod log;
mod script;
mod side;
mod sse;

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::Response;
use serde_json::{json, Value};

pub use log::{RecordedRequest, SideRequest, ToolResult};
pub use script::{Repeat, Reply, ReplyKind, Script, ScriptError, ToolCall, Usage};

use log::RequestLog;
use sse::Block;

#[derive(Debug, thiserror::Error)]
pub enum ModelServerError {
    #[error("failed to listen on {addr}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("failed to start the model server runtime: {0}")]
    Runtime(std::io::Error),
    #[error("failed to open request log {path}")]
    LogFile {
        path: PathBuf,
        source: std::io::Error,
    },
}

#[derive(Debug, Clone, Default)]
pub struct ServerOptions {
    /// Port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// Also append every request as a JSON line to this file.
    pub log_path: Option<PathBuf>,
}

/// A running server; dropping it shuts it down.
pub struct ModelServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    runtime: Option<tokio::runtime::Runtime>,
}

struct Shared {
    script: Mutex<Cursor>,
    log: RequestLog,
}

/// Position in the script: the current reply and how often it has been given.
struct Cursor {
    replies: Vec<Reply>,
    index: usize,
    used: u32,
    served: usize,
}

impl Cursor {
    fn next(&mut self) -> Option<(usize, Reply)> {
        while let Some(reply) = self.replies.get(self.index) {
            if reply.repeat.allows(self.used) {
                self.used += 1;
                self.served += 1;
                return Some((self.index, reply.clone()));
            }
            self.index += 1;
            self.used = 0;
        }
        None
    }

    fn remaining(&self) -> usize {
        match self.replies.get(self.index) {
            Some(current) if !current.repeat.allows(self.used) => {
                self.replies.len() - self.index - 1
            }
            Some(_) => self.replies.len() - self.index,
            None => 0,
        }
    }
}

impl ModelServer {
    /// Starts on a free port. Panics if that fails, which only a broken machine causes.
    pub fn start(script: Script) -> ModelServer {
        Self::start_with(script, ServerOptions::default())
            .unwrap_or_else(|err| panic!("scripted model server: {}", crate::error_chain(&err)))
    }

    pub fn start_with(
        script: Script,
        options: ServerOptions,
    ) -> Result<ModelServer, ModelServerError> {
        let log = RequestLog::new(options.log_path.as_deref()).map_err(|source| {
            ModelServerError::LogFile {
                path: options.log_path.clone().unwrap_or_default(),
                source,
            }
        })?;
        let requested = SocketAddr::from((Ipv4Addr::LOCALHOST, options.port));
        let bind_error = |source| ModelServerError::Bind {
            addr: requested,
            source,
        };
        let listener = std::net::TcpListener::bind(requested).map_err(bind_error)?;
        listener.set_nonblocking(true).map_err(bind_error)?;
        let addr = listener.local_addr().map_err(bind_error)?;

        // Its own runtime, so plain #[test] functions and async tests can both use it.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("scripted-model-server")
            .enable_all()
            .build()
            .map_err(ModelServerError::Runtime)?;
        let listener = {
            let _guard = runtime.enter();
            tokio::net::TcpListener::from_std(listener).map_err(bind_error)?
        };
        let shared = Arc::new(Shared {
            script: Mutex::new(Cursor {
                replies: script.replies,
                index: 0,
                used: 0,
                served: 0,
            }),
            log,
        });
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&shared));
        runtime.spawn(async move {
            // Serving only ends with the runtime; per-connection errors are handled inside.
            let _ = axum::serve(listener, app).await;
        });
        Ok(ModelServer {
            addr,
            shared,
            runtime: Some(runtime),
        })
    }

    /// `http://127.0.0.1:<port>`, the value for `ANTHROPIC_BASE_URL`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.log.snapshot()
    }

    /// The requests the script answered (or should have: includes those after it ran out).
    pub fn model_requests(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(RecordedRequest::is_model_request)
            .collect()
    }

    /// Script replies not yet given (a reply given some but not all of its repeats counts).
    pub fn remaining(&self) -> usize {
        self.lock_script().remaining()
    }

    fn lock_script(&self) -> std::sync::MutexGuard<'_, Cursor> {
        self.shared
            .script
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            // Does not wait for stalled replies (delay_ms) and is allowed inside async tests.
            runtime.shutdown_background();
        }
    }
}

/// What to send back for one request.
enum Answer {
    Message {
        blocks: Vec<Block>,
        usage: Usage,
    },
    Json {
        status: u16,
        body: Value,
        headers: BTreeMap<String, String>,
    },
    Raw {
        status: u16,
        body: String,
        headers: BTreeMap<String, String>,
    },
}

async fn handle(
    axum::extract::State(shared): axum::extract::State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri
        .path_and_query()
        .map_or_else(|| uri.path().to_owned(), |pq| pq.as_str().to_owned());
    let body = parse_body(&body);
    let side = side::classify(method.as_str(), &path, &body);
    let (step, answer, delay_ms) = match side {
        Some(kind) => (None, side_answer(kind, &body), None),
        None => {
            let (next, served) = {
                let mut cursor = shared
                    .script
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                (cursor.next(), cursor.served)
            };
            match next {
                Some((step, reply)) => (Some(step), scripted_answer(&reply), reply.delay_ms),
                None => (None, exhausted_answer(served), None),
            }
        }
    };
    let status = match &answer {
        Answer::Message { .. } => 200,
        Answer::Json { status, .. } | Answer::Raw { status, .. } => *status,
    };
    shared.log.push(RecordedRequest {
        method: method.to_string(),
        path,
        headers: recorded_headers(&headers),
        body: body.clone(),
        side,
        step,
        status,
    });
    if let Some(delay_ms) = delay_ms {
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
    }
    render(answer, &body, method == Method::HEAD)
}

fn parse_body(bytes: &Bytes) -> Value {
    if bytes.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()))
}

fn recorded_headers(headers: &HeaderMap) -> BTreeMap<String, String> {
    headers
        .iter()
        .map(|(name, value)| {
            let name = name.as_str().to_ascii_lowercase();
            let value = if matches!(name.as_str(), "x-api-key" | "authorization" | "cookie") {
                "<redacted>".to_owned()
            } else {
                String::from_utf8_lossy(value.as_bytes()).into_owned()
            };
            (name, value)
        })
        .collect()
}

fn side_answer(kind: SideRequest, body: &Value) -> Answer {
    match kind {
        SideRequest::Probe => Answer::Raw {
            status: 200,
            body: String::new(),
            headers: BTreeMap::new(),
        },
        SideRequest::CountTokens => Answer::Json {
            status: 200,
            body: json!({"input_tokens": Usage::default().input_tokens}),
            headers: BTreeMap::new(),
        },
        SideRequest::Unknown => Answer::Json {
            status: 404,
            body: error_body(404, "scripted model server: no such endpoint"),
            headers: BTreeMap::new(),
        },
        SideRequest::SmallModel
        | SideRequest::TokenProbe
        | SideRequest::Warmup
        | SideRequest::FormatQuery => Answer::Message {
            blocks: vec![Block::Text(side::side_answer_text(kind, body))],
            usage: Usage::default(),
        },
    }
}

fn scripted_answer(reply: &Reply) -> Answer {
    let usage = reply.usage.unwrap_or_default();
    match &reply.kind {
        ReplyKind::Text { text } => Answer::Message {
            blocks: vec![Block::Text(text.clone())],
            usage,
        },
        ReplyKind::ToolUse { text, calls } => Answer::Message {
            blocks: sse::tool_blocks(text.as_deref(), calls, new_tool_use_id),
            usage,
        },
        ReplyKind::StructuredOutput { input } => Answer::Message {
            blocks: sse::tool_blocks(
                None,
                &[ToolCall::new("StructuredOutput", input.clone())],
                new_tool_use_id,
            ),
            usage,
        },
        ReplyKind::Error {
            status,
            body,
            headers,
        } => match body {
            Some(Value::String(raw)) => Answer::Raw {
                status: *status,
                body: raw.clone(),
                headers: headers.clone(),
            },
            Some(body) => Answer::Json {
                status: *status,
                body: body.clone(),
                headers: headers.clone(),
            },
            None => Answer::Json {
                status: *status,
                body: error_body(*status, "scripted error"),
                headers: headers.clone(),
            },
        },
    }
}

/// Loud on purpose: a test whose agent asks more than the script foresaw must fail visibly.
fn exhausted_answer(served: usize) -> Answer {
    Answer::Json {
        status: 500,
        body: error_body(
            500,
            &format!(
                "scripted model server: the script is exhausted after {served} replies; \
                 this request was not scripted"
            ),
        ),
        // The client must not retry a request nothing will ever answer.
        headers: BTreeMap::from([("x-should-retry".to_owned(), "false".to_owned())]),
    }
}

/// An error object shaped like the Messages API's.
fn error_body(status: u16, message: &str) -> Value {
    let kind = match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

fn new_tool_use_id() -> String {
    format!("toolu_{}", uuid::Uuid::new_v4().simple())
}

fn render(answer: Answer, request_body: &Value, head: bool) -> Response {
    let request_id = format!("req_scripted_{}", uuid::Uuid::new_v4().simple());
    let (status, content_type, body, headers) = match answer {
        Answer::Message { blocks, usage } => {
            let model = request_body
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("claude-scripted");
            let message_id = format!("msg_scripted_{}", uuid::Uuid::new_v4().simple());
            let streamed = request_body.get("stream").and_then(Value::as_bool) == Some(true);
            if streamed {
                (
                    200,
                    "text/event-stream",
                    sse::message_events(&message_id, model, &blocks, usage),
                    BTreeMap::new(),
                )
            } else {
                (
                    200,
                    "application/json",
                    sse::message_json(&message_id, model, &blocks, usage).to_string(),
                    BTreeMap::new(),
                )
            }
        }
        Answer::Json {
            status,
            body,
            headers,
        } => (status, "application/json", body.to_string(), headers),
        Answer::Raw {
            status,
            body,
            headers,
        } => (status, "text/plain", body, headers),
    };
    let mut response = Response::new(if head {
        Body::empty()
    } else {
        Body::from(body)
    });
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let response_headers = response.headers_mut();
    response_headers.insert("content-type", HeaderValue::from_static(content_type));
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        response_headers.insert("request-id", value);
    }
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            response_headers.insert(name, value);
        }
    }
    response
}
