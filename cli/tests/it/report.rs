//! `runs report`: the page rendered in headless Chromium (Debian's `chromium`,
//! installed by `.ci/run`). Without it the tests fail in CI and skip, saying so,
//! elsewhere. The screenshot is kept under `target/` for a person to look at.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::{read_json, TestContext};

fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |d| d.join(name)))
        .find(|p| p.is_file())
}

/// Chromium, or `None` after saying why the test does not run (a failure in CI).
fn chromium_or_skip(test: &str) -> Option<PathBuf> {
    match chromium() {
        Some(c) => Some(c),
        None if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("{test}: chromium is not installed, and CI must render the report (`.ci/run` installs it)")
        }
        None => {
            eprintln!("SKIPPED {test}: chromium is not installed here (apt-get install chromium); CI runs it");
            None
        }
    }
}

/// How long a headless Chromium is given to render one page and exit.
const CHROMIUM_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// A command's output, the command killed if it has not exited within `wait`.
struct Bounded {
    exited: bool,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

fn within(cmd: &mut Command, wait: std::time::Duration) -> Bounded {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    let mut child = cmd
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run chromium");
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = std::time::Instant::now() + wait;
    let exited = loop {
        if child.try_wait().unwrap().is_some() {
            break true;
        }
        if std::time::Instant::now() >= deadline {
            // Its helpers hold the pipes too: the whole group goes.
            // SAFETY: a signal to the group this call made, nothing else.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            break false;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    Bounded {
        exited,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

/// What headless Chromium made of a page: the DOM after its script ran, and every
/// console message. A proxy that does not exist stands in for the network, so a
/// page that fetched anything would log the failure.
struct Rendered {
    dom: String,
    console: Vec<String>,
}

fn render(chromium: &Path, page: &Path, fragment: &str, screenshot: Option<&Path>) -> Rendered {
    let profile = tempfile::tempdir().unwrap();
    let base = |cmd: &mut Command| {
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--proxy-server=127.0.0.1:9",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1280,1600",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()));
    };
    let url = format!("file://{}{fragment}", page.display());
    let mut dump = Command::new(chromium);
    base(&mut dump);
    let out = within(dump.arg("--dump-dom").arg(&url), CHROMIUM_WAIT);
    assert!(
        out.exited,
        "chromium --dump-dom did not exit within {CHROMIUM_WAIT:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let console = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught") || l.contains("net::ERR"))
        .map(str::to_owned)
        .collect();
    if let Some(shot) = screenshot {
        let mut cmd = Command::new(chromium);
        base(&mut cmd);
        // Headless Chromium has been seen to stay after writing its
        // screenshot (once in a loaded suite): the file is what is wanted.
        let status = within(
            cmd.arg(format!("--screenshot={}", shot.display()))
                .arg(&url),
            CHROMIUM_WAIT,
        );
        assert!(
            shot.is_file(),
            "no screenshot (chromium {}): {}",
            if status.exited {
                "exited"
            } else {
                "killed after the wait"
            },
            String::from_utf8_lossy(&status.stderr)
        );
    }
    Rendered {
        dom: String::from_utf8_lossy(&out.stdout).into_owned(),
        console,
    }
}

/// A run with a succeeded check, an agent stage refused a call whose verification
/// failed, and a stage skipped after a failure.
fn varied_run() -> TestContext {
    let mut ctx = TestContext::with_fake_claude("refused-then-write");
    ctx.set_env("FAKE_CLAUDE_WRITE", "value.txt=41");
    ctx.write("prompts/implement.md", "Make the value 42.\n");
    ctx.write_agent_pipeline(
        "  timeout: 20s\n",
        r#"  - { id: lint, kind: check, argv: ["true"] }
  - id: implement
    kind: execute
    needs: [lint]
    prompt: prompts/implement.md
    verification:
      - { name: answer, argv: [grep, -qx, "42", value.txt] }
  - { id: broken, kind: check, argv: ["false"] }
  - { id: after-broken, kind: check, needs: [broken], argv: ["true"] }
"#,
    );
    let out = ctx.run(&["run"]);
    assert_ne!(out.code, 0, "{}", out.snapshot());
    ctx
}

/// Where `runs report` writes by default (the command's output is filtered).
fn report_path(ctx: &TestContext) -> PathBuf {
    let run = ctx.only_run_dir();
    let id = run.file_name().unwrap().to_str().unwrap();
    ctx.path(&format!(".specbridge/reports/{id}.html"))
}

fn screenshot_path(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[test]
fn the_report_renders_offline_with_every_stage_and_no_console_error() {
    let Some(chromium) = chromium_or_skip("report renders in chromium") else {
        return;
    };
    let ctx = varied_run();
    let out = ctx.run(&["runs", "report", "latest", "--json"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert!(v["report"].as_str().unwrap().ends_with(".html"), "{v:#}");
    let page = report_path(&ctx);
    let html = std::fs::read_to_string(&page)
        .unwrap_or_else(|e| panic!("{}: {e}: {}", page.display(), out.snapshot()));
    // Nothing to fetch: no URL in an attribute but the SVG namespace, no asset
    // element, no CSS url(). (URLs in recorded text, such as a refused `curl`, are
    // escaped text.)
    let attrs: Vec<&str> = html
        .match_indices("=\"http")
        .map(|(i, _)| &html[i..(i + 40).min(html.len())])
        .filter(|u| !u.starts_with("=\"http://www.w3.org/2000/svg\""))
        .collect();
    assert!(attrs.is_empty(), "the page points at URLs: {attrs:?}");
    for tag in ["<link", "<img", "<iframe", " src=", "url("] {
        assert!(!html.contains(tag), "external asset {tag}");
    }
    assert!(
        html.contains("https://example.invalid/install.sh"),
        "the refused call is shown"
    );

    let shot = screenshot_path("report.png");
    let rendered = render(&chromium, &page, "", Some(&shot));
    assert!(
        rendered.console.is_empty(),
        "console: {:#?}",
        rendered.console
    );
    let run = ctx.only_run_dir();
    for id in ["lint", "implement", "broken", "after-broken"] {
        let status = read_json(&run.join(format!("stages/{id}/stage.json")))["status"]
            .as_str()
            .unwrap()
            .to_string();
        let marker = format!("data-stage=\"{id}\" data-status=\"{status}\"");
        assert!(
            rendered.dom.contains(&marker),
            "{id} as {status} is missing from the page"
        );
        assert!(
            rendered
                .dom
                .contains(&format!("<title>{id}: {status}</title>")),
            "{id} is missing from the graph"
        );
    }
    assert!(
        rendered.dom.contains("id=\"audit\""),
        "the audit result is shown"
    );
    // Closed stages keep their details in a template; a link opens one and the
    // script renders its transcript and verification.
    assert_eq!(rendered.dom.matches("<template>").count(), 4);
    let index = ["after-broken", "broken", "implement", "lint"]
        .iter()
        .position(|s| *s == "implement")
        .unwrap();
    let opened = render(
        &chromium,
        &page,
        &format!("#stage-{index}"),
        Some(&screenshot_path("report-stage.png")),
    );
    assert!(opened.console.is_empty(), "console: {:#?}", opened.console);
    assert_eq!(
        opened.dom.matches("<template>").count(),
        3,
        "one stage was opened"
    );
    assert!(
        opened.dom.contains("class=\"refused\""),
        "the refused call is rendered"
    );
    assert!(
        opened.dom.contains("<b>FAIL</b> answer"),
        "the failed verification is rendered"
    );
    eprintln!("screenshot: {}", shot.display());
}

/// The control: a page with a script error and a fetch is caught by the same
/// checks, so an empty console above means something.
#[test]
fn the_console_check_sees_script_errors_and_fetches() {
    let Some(chromium) = chromium_or_skip("console check control") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("bad.html");
    std::fs::write(
        &page,
        "<!DOCTYPE html><html><body><img src=\"http://example.invalid/x.png\"><script>nope();</script></body></html>",
    )
    .unwrap();
    let rendered = render(&chromium, &page, "", None);
    assert!(!rendered.console.is_empty(), "a broken page logs errors");
}

#[test]
fn a_thousand_stage_run_reports_quickly_and_small() {
    let ctx = TestContext::new();
    let mut yaml = String::from("version: 1\nname: big\nconcurrency: 16\nstages:\n");
    for i in 0..1000 {
        let needs = if i < 10 {
            String::new()
        } else {
            format!(", needs: [s{:03}]", i / 10 - 1)
        };
        yaml.push_str(&format!(
            "  - {{ id: s{i:03}, kind: check, argv: [\"true\"]{needs} }}\n"
        ));
    }
    ctx.write("specbridge.yaml", &yaml);
    ctx.commit_all("big");
    let out = ctx.run(&["run"]);
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let started = std::time::Instant::now();
    let out = ctx.run(&["runs", "report", "latest", "--json"]);
    let took = started.elapsed();
    assert_eq!(out.code, 0, "{}", out.snapshot());
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let bytes = v["bytes"].as_u64().unwrap();
    assert!(bytes < 3 * 1024 * 1024, "{bytes} bytes for 1,000 stages");
    assert!(took < std::time::Duration::from_secs(20), "took {took:?}");
    let Some(chromium) = chromium_or_skip("1,000-stage report in chromium") else {
        return;
    };
    let page = report_path(&ctx);
    let rendered = render(
        &chromium,
        &page,
        "",
        Some(&screenshot_path("report-1000.png")),
    );
    assert!(
        rendered.console.is_empty(),
        "console: {:#?}",
        rendered.console
    );
    assert_eq!(
        rendered.dom.matches("<details class=\"stage\"").count(),
        1000
    );
    // Details stay in their templates until opened.
    assert_eq!(rendered.dom.matches("<template>").count(), 1000);
}
