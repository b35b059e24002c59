//! The credential shapes: one table that the redactor replaces and audit looks for,
//! so that a file the redactor wrote can never fail audit's scan, and a shape added
//! here is both redacted and audited.

/// One credential shape.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Short name (`github`, `private-key`), as audit reports it.
    pub name: &'static str,
    /// What it is, for messages (`a GitHub token`).
    pub label: &'static str,
    /// A bytes regex. Where the shape includes words that are not secret (`Bearer `,
    /// `aws_secret_access_key=`), they are the group `keep` and are kept.
    pub pattern: &'static str,
    /// Whether the group `keep` is kept in front of the placeholder.
    pub keeps_prefix: bool,
}

/// Every shape, most specific first: where two could start at the same byte
/// (`sk-ant-…` is also `sk-…`), the first wins in audit's combined pattern.
///
/// Each starts at an ASCII word boundary so that identifiers merely containing a
/// prefix (`task-…`) are left alone, and none matches a newline except the
/// private-key block, so that a log redacted line by line and one redacted whole
/// agree (the stream writer handles the block's lines itself).
pub const SHAPES: &[Shape] = &[
    Shape {
        name: "anthropic",
        label: "an Anthropic API key",
        pattern: r"(?-u:\b)sk-ant-[A-Za-z0-9_\-]{8,}",
        keeps_prefix: false,
    },
    Shape {
        name: "openai",
        label: "an OpenAI API key",
        pattern: r"(?-u:\b)sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}",
        keeps_prefix: false,
    },
    Shape {
        name: "github",
        label: "a GitHub token",
        pattern: r"(?-u:\b)(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})",
        keeps_prefix: false,
    },
    Shape {
        name: "gitlab",
        label: "a GitLab token",
        pattern: r"(?-u:\b)glpat-[A-Za-z0-9_\-]{20,}",
        keeps_prefix: false,
    },
    Shape {
        name: "aws",
        label: "an AWS access key id",
        pattern: r"(?-u:\b)(?:AKIA|ASIA)[0-9A-Z]{16}(?-u:\b)",
        keeps_prefix: false,
    },
    Shape {
        name: "aws-secret",
        label: "an AWS secret access key",
        // 40 base64 characters after a name that says what they are, as in an
        // env file, a credentials file, JSON (quotes escaped or not) or YAML.
        pattern: r#"(?i:(?P<keep>(?-u:\b)(?:aws_?)?secret_?access_?key\\?["']?[ \t]*[:=][ \t]*\\?["']?))[A-Za-z0-9/+]{40}[A-Za-z0-9/+=]*"#,
        keeps_prefix: true,
    },
    Shape {
        name: "slack",
        label: "a Slack token",
        pattern: r"(?-u:\b)xox[abposr]-[A-Za-z0-9\-]{10,}",
        keeps_prefix: false,
    },
    Shape {
        name: "stripe",
        label: "a Stripe key",
        pattern: r"(?-u:\b)(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}",
        keeps_prefix: false,
    },
    Shape {
        name: "google",
        label: "a Google API key",
        pattern: r"(?-u:\b)AIza[0-9A-Za-z_\-]{35}",
        keeps_prefix: false,
    },
    Shape {
        name: "npm",
        label: "an npm token",
        pattern: r"(?-u:\b)npm_[A-Za-z0-9]{36}",
        keeps_prefix: false,
    },
    Shape {
        name: "bearer",
        label: "a bearer token",
        pattern: r"(?i:(?P<keep>(?-u:\b)bearer[ \t]+))[A-Za-z0-9\-._~+/]{8,}=*",
        keeps_prefix: true,
    },
    Shape {
        name: "jwt",
        label: "a JSON Web Token",
        pattern: r"(?-u:\b)eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*",
        keeps_prefix: false,
    },
    Shape {
        name: "private-key",
        label: "a private key",
        // The whole block, or everything after a header whose end is not there.
        pattern: r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----(?s-u:.*?)(?:-----END[A-Z0-9 ]*PRIVATE KEY-----|\z)",
        keeps_prefix: false,
    },
];

/// The header of a private-key block (the stream writer's state change).
pub(crate) const PEM_BEGIN: &str = r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----";
/// The footer of a private-key block.
pub(crate) const PEM_END: &str = r"-----END[A-Z0-9 ]*PRIVATE KEY-----";
/// Longer than any footer: what the stream writer keeps while it looks for one.
pub(crate) const PEM_MARKER_MAX: usize = 96;

/// What a left word boundary also accepts: a JSON or C escape (`\n`, `\t`) just
/// before the token. In a log of JSON lines a secret at the start of a line of the
/// agent's text follows `\n`, and `n` is a word character: a plain `\b` would let
/// it through. The escape is the group `esc`, kept in front of the placeholder.
const LEFT_BOUNDARY: &str = r"(?-u:\b)";
const LEFT_BOUNDARY_OR_ESCAPE: &str = r"(?:(?-u:\b)|(?P<esc>\\[nrtfb]))";

impl Shape {
    /// The pattern the redactor compiles: the left boundary also after an escape.
    pub(crate) fn compiled_pattern(&self) -> String {
        self.pattern
            .replacen(LEFT_BOUNDARY, LEFT_BOUNDARY_OR_ESCAPE, 1)
    }

    /// The same without group names, to be one alternative among others (audit).
    pub(crate) fn anonymous_pattern(&self) -> String {
        self.compiled_pattern()
            .replace("(?P<esc>", "(?:")
            .replace("(?P<keep>", "(?:")
    }
}

/// The shape named `name`.
pub fn shape(name: &str) -> Option<&'static Shape> {
    SHAPES.iter().find(|s| s.name == name)
}
