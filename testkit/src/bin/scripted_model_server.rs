//! Serves a scripted model on 127.0.0.1 for pipelines and manual runs of an agent CLI.
//!
//! `scripted-model-server --script replies.yaml --port-file port.txt [--port N] [--log requests.jsonl]`
//! then run the agent with `ANTHROPIC_BASE_URL=http://127.0.0.1:$(cat port.txt)`.
//! It serves until killed.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use specbridge_testkit::error_chain;
use specbridge_testkit::model_server::{ModelServer, Script, ServerOptions};

#[derive(Parser)]
#[command(about = "Answer Messages API requests from a script of replies")]
struct Args {
    /// Script of replies (JSON, or YAML for any other extension).
    #[arg(long, value_name = "FILE")]
    script: PathBuf,
    /// Written with the port number once the server is listening.
    #[arg(long, value_name = "FILE")]
    port_file: Option<PathBuf>,
    /// Port on 127.0.0.1; 0 picks a free one.
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Append every request as a JSON line to this file.
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match serve(&args) {
        Ok(never) => match never {},
        Err(message) => {
            eprintln!("scripted-model-server: {message}");
            ExitCode::FAILURE
        }
    }
}

enum Never {}

fn serve(args: &Args) -> Result<Never, String> {
    let script = Script::from_file(&args.script).map_err(|err| error_chain(&err))?;
    let server = ModelServer::start_with(
        script,
        ServerOptions {
            port: args.port,
            log_path: args.log.clone(),
        },
    )
    .map_err(|err| error_chain(&err))?;
    if let Some(port_file) = &args.port_file {
        write_port_file(port_file, server.port())?;
    }
    eprintln!("scripted-model-server: listening on {}", server.base_url());
    loop {
        std::thread::park();
    }
}

/// Written through a rename so a reader polling for the file never sees a partial number.
fn write_port_file(path: &Path, port: u16) -> Result<(), String> {
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    std::fs::write(&partial, format!("{port}\n"))
        .and_then(|()| std::fs::rename(&partial, path))
        .map_err(|err| format!("failed to write port file {}: {err}", path.display()))
}
