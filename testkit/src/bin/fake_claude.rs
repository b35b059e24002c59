//! `fake-claude`: a stand-in for the Claude Code CLI, driven by `FAKE_CLAUDE_*`
//! environment variables (see `specbridge_testkit::fake`).

fn main() {
    std::process::exit(specbridge_testkit::fake::run());
}
