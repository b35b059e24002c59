use std::sync::Arc;

use super::*;

const ANTHROPIC: &str = "sk-ant-api03-AbCdEf0123456789_xyzXYZ-abc";
const OPENAI: &str = "sk-proj-Q1w2E3r4T5y6U7i8O9p0AaSsDdFf";
const OPENAI_OLD: &str = "sk-1234567890abcdefghijklmnopqrst";
const GITHUB: &str = "ghp_16C7e42F292c6912E7710c838347Ae178B4a";
const GITHUB_PAT: &str = "github_pat_11ABCDEFG0123456789_abcdefghijklmnop";
const GITLAB: &str = "glpat-xY9zAbCdEfGh1234567890";
const AWS: &str = "AKIAIOSFODNN7EXAMPLE";
const AWS_SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
const SLACK: &str = "xoxb-123456789012-abcdefghijkl";
const STRIPE: &str = "sk_live_4eC39HqLyjWDarjtT1zdp7dc";
const STRIPE_RESTRICTED: &str = "rk_live_51H8abcdefghijklmnop";
const GOOGLE: &str = "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY";
const NPM: &str = "npm_abcdefghijklmnopqrstuvwxyz0123456789";
const JWT: &str =
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
const PEM: &str = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2\nq1w2e3r4t5y6u7i8o9p0ASDFGHJKL\n-----END RSA PRIVATE KEY-----";

fn plain() -> Redactor {
    Redactor::default()
}

/// Every shape, standing alone.
fn shaped() -> Vec<&'static str> {
    vec![
        ANTHROPIC,
        OPENAI,
        OPENAI_OLD,
        GITHUB,
        GITHUB_PAT,
        GITLAB,
        AWS,
        SLACK,
        STRIPE,
        STRIPE_RESTRICTED,
        GOOGLE,
        NPM,
        JWT,
        PEM,
    ]
}

#[test]
fn redacts_each_token_shape() {
    let r = plain();
    for secret in shaped() {
        let text = format!("value: {secret}, done");
        assert_eq!(r.redact_str(&text), "value: <redacted>, done", "{secret}");
    }
    for kind in ["gho", "ghs", "ghu"] {
        let t = format!("{kind}_abcdefghijklmnopqrstuvwxyz0123");
        assert_eq!(r.redact_str(&t), REDACTED);
    }
}

#[test]
fn an_aws_secret_key_is_redacted_after_its_name_keeping_the_name() {
    let r = plain();
    for (text, want) in [
        (
            format!("aws_secret_access_key = {AWS_SECRET}\n"),
            "aws_secret_access_key = <redacted>\n",
        ),
        (
            format!("AWS_SECRET_ACCESS_KEY={AWS_SECRET}"),
            "AWS_SECRET_ACCESS_KEY=<redacted>",
        ),
        (
            format!(r#"{{"SecretAccessKey": "{AWS_SECRET}"}}"#),
            r#"{"SecretAccessKey": "<redacted>"}"#,
        ),
        (
            format!(r#""{{\"aws_secret_access_key\":\"{AWS_SECRET}\"}}""#),
            r#""{\"aws_secret_access_key\":\"<redacted>\"}""#,
        ),
    ] {
        assert_eq!(r.redact_str(&text), want);
    }
    // Forty base64 characters alone are a hash as often as a key.
    assert_eq!(r.redact_str(AWS_SECRET), AWS_SECRET);
}

#[test]
fn a_private_key_block_is_redacted_whole_and_an_unterminated_one_to_the_end() {
    let r = plain();
    let text = format!("before\n{PEM}\nafter\n");
    assert_eq!(r.redact_str(&text), "before\n<redacted>\nafter\n");
    let escaped = format!(r#"{{"k":"{}"}}"#, PEM.replace('\n', "\\n"));
    assert_eq!(r.redact_str(&escaped), r#"{"k":"<redacted>"}"#);
    let cut = "x -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n";
    assert_eq!(r.redact_str(cut), "x <redacted>");
}

#[test]
fn a_token_after_a_json_escape_is_redacted_and_the_escape_kept() {
    // Found by the real CLI: stream-json encodes a newline before a token as `\n`.
    let r = plain();
    for secret in shaped().into_iter().filter(|s| !s.starts_with("-----")) {
        for esc in ["\\n", "\\t", "\\r"] {
            let text = format!(r##"{{"markdown":"# Notes{esc}{esc}{secret}{esc}"}}"##);
            assert_eq!(
                r.redact_str(&text),
                format!(r##"{{"markdown":"# Notes{esc}{esc}<redacted>{esc}"}}"##),
                "{secret} after {esc}"
            );
        }
    }
    assert_eq!(
        r.redact_str(r#""a\nBearer abcdefghij12""#),
        r#""a\nBearer <redacted>""#
    );
    // An escape is not a reason to redact what is not a token.
    let text = r"x\ntask-ant-api03-abcdefghijk x\nghp_short";
    assert_eq!(r.redact_str(text), text);
}

#[test]
fn keeps_the_bearer_word() {
    let r = plain();
    assert_eq!(
        r.redact_str("Authorization: Bearer abc.DEF-123_456/789=="),
        "Authorization: Bearer <redacted>"
    );
    assert_eq!(
        r.redact_str("authorization: bearer 0123456789"),
        "authorization: bearer <redacted>"
    );
}

#[test]
fn leaves_ordinary_text_alone() {
    let r = plain();
    for text in [
        "task-123 is done",
        "the sk- prefix",
        "risk-management-is-important-for-everyone",
        "AKIA is a prefix",
        "Bearer of bad news",
        "ghp_short",
        "npm_install",
        "desk_live_feed",
        "-----BEGIN PUBLIC KEY-----",
    ] {
        assert_eq!(r.redact_str(text), text);
    }
}

#[test]
fn secret_names() {
    for name in [
        "ANTHROPIC_API_KEY",
        "GITHUB_TOKEN",
        "MY_SECRET",
        "DB_PASSWORD",
        "MYSQL_PASSWD",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "BASIC_AUTH",
        "AUTHORIZATION",
        "npm_config__auth",
    ] {
        assert!(is_secret_name(name), "{name}");
    }
    for name in [
        "HOME",
        "PATH",
        "GIT_AUTHOR_NAME",
        "GIT_AUTHOR_EMAIL",
        "LANG",
    ] {
        assert!(!is_secret_name(name), "{name}");
    }
}

#[test]
fn redacts_values_of_secret_named_variables_of_eight_characters_or_more() {
    let r = Redactor::from_pairs([
        ("ANTHROPIC_API_KEY", "sk-test-1"),
        ("MY_PASSWORD", "hunter2hunter2"),
        ("MYSQL_PASSWD", "pa55wd-mysql"),
        ("db_credentials", "user:pa55word"),
        ("BASIC_AUTH", "admin:letmein"),
        ("GH_TOKEN", "short12"),
        ("HOME", "/home/user"),
        ("CLIENT_SECRET", "s3cr3t-value"),
    ]);
    assert_eq!(
        r.redact_str(
            "key sk-test-1, pw hunter2hunter2 pa55wd-mysql, db user:pa55word, admin:letmein s3cr3t-value"
        ),
        "key <redacted>, pw <redacted> <redacted>, db <redacted>, <redacted> <redacted>"
    );
    // Seven characters are too short to redact safely; and HOME is not a secret name.
    assert_eq!(r.redact_str("short12 /home/user"), "short12 /home/user");
}

#[test]
fn declared_secrets_count_whatever_their_names() {
    let mut r = plain();
    r.add_secret("DEPLOY_HOOK", "hook-9f8e7d6c");
    r.add_secret("SHORTY", "abc");
    assert_eq!(r.redact_str("x hook-9f8e7d6c abc"), "x <redacted> abc");
}

#[test]
fn a_multi_line_value_is_also_looked_for_a_line_at_a_time() {
    let mut r = plain();
    r.add_secret("DEPLOY_CERT", "first-line-of-it\nsecond-line-of-it");
    assert_eq!(r.redact_str("a second-line-of-it b"), "a <redacted> b");
}

#[test]
fn a_longer_secret_containing_a_shorter_one_is_redacted_whole() {
    let r = Redactor::from_pairs([("A_KEY", "abcdefgh"), ("B_KEY", "abcdefghijkl")]);
    assert_eq!(
        r.redact_str("abcdefghijkl abcdefgh"),
        "<redacted> <redacted>"
    );
}

#[test]
fn bytes_match_strings_and_survive_invalid_utf8() {
    let r = Redactor::from_pairs([("X_SECRET", "canary-value-1")]);
    let text = format!("a {GITHUB} b canary-value-1 c Bearer tokentoken\n");
    assert_eq!(
        String::from_utf8(r.redact_bytes(text.as_bytes())).unwrap(),
        r.redact_str(&text)
    );
    let mut raw = vec![0xff, b' '];
    raw.extend_from_slice(AWS.as_bytes());
    assert_eq!(
        r.redact_bytes(&raw),
        [&[0xff, b' '][..], REDACTED.as_bytes()].concat()
    );
}

#[test]
fn redacts_json_values_and_keys() {
    let r = Redactor::from_pairs([("API_KEY", "canary-123456")]);
    let mut v = serde_json::json!({
        "result": format!("used {OPENAI}"),
        "nested": [{"t": "canary-123456"}, 3, null, true],
        "canary-123456": "key is secret",
    });
    r.redact_json(&mut v);
    assert_eq!(
        v,
        serde_json::json!({
            "result": "used <redacted>",
            "nested": [{"t": "<redacted>"}, 3, null, true],
            "<redacted>": "key is secret",
        })
    );
}

#[test]
fn find_names_the_kind_and_line_never_the_value() {
    let r = Redactor::from_pairs([("MY_SECRET", "canary-find-01")]);
    let text = format!("# Doc\n\nuse {GITHUB}\nand canary-find-01 and {GITHUB}\n");
    let found = r.find(text.as_bytes());
    assert_eq!(
        found,
        vec![
            Found {
                kind: "a GitHub token".into(),
                line: 3
            },
            Found {
                kind: "the value of $MY_SECRET".into(),
                line: 4
            },
        ]
    );
    assert!(r.find(b"nothing here\n").is_empty());
}

/// Streams `text` through a [`RedactingWriter`] in the given chunk sizes.
fn stream(r: &Redactor, text: &[u8], chunks: &[usize]) -> Vec<u8> {
    let mut w = RedactingWriter::new(Arc::new(r.clone()), Vec::new());
    let mut rest = text;
    let mut i = 0;
    while !rest.is_empty() {
        let n = chunks[i % chunks.len()].max(1).min(rest.len());
        w.write_chunk(&rest[..n]).unwrap();
        assert!(w.held() <= stream::HOLD + n, "held {}", w.held());
        rest = &rest[n..];
        i += 1;
    }
    w.finish().unwrap()
}

#[test]
fn a_secret_split_across_a_64_kib_chunk_boundary_is_caught() {
    let r = Redactor::from_pairs([("CANARY_TOKEN", "canary-abcdef-012345")]);
    const CHUNK: usize = 64 * 1024;
    for secret in ["canary-abcdef-012345", GITHUB, JWT, PEM] {
        for split in [1, secret.len() / 2, secret.len() - 1] {
            // On one line, and after a newline.
            for newline in [false, true] {
                let mut text = "x".repeat(CHUNK - split - 1);
                text.push(if newline { '\n' } else { ' ' });
                text.push_str(secret);
                text.push_str(" tail\nnext line\n");
                let out = stream(&r, text.as_bytes(), &[CHUNK]);
                let out = String::from_utf8(out).unwrap();
                assert!(!out.contains(secret), "{secret} split at {split}");
                assert_eq!(out, r.redact_str(&text), "{secret} split at {split}");
            }
        }
    }
}

#[test]
fn an_overlong_line_is_cut_between_secrets() {
    let r = Redactor::from_pairs([("X_TOKEN", "canary-abcdef-012345")]);
    let mut text = String::new();
    while text.len() < 3 * stream::HOLD {
        text.push_str(&format!(
            r#"{{"a":"{}","b":"canary-abcdef-012345","c":"{GITHUB}"}},"#,
            "p".repeat(97)
        ));
    }
    for chunks in [&[64 * 1024][..], &[4093, 65536, 17][..]] {
        let out = String::from_utf8(stream(&r, text.as_bytes(), chunks)).unwrap();
        assert!(!out.contains("canary-abcdef-012345"));
        assert!(!out.contains(GITHUB));
        assert_eq!(out, r.redact_str(&text));
    }
}

#[test]
fn a_private_key_over_many_chunks_is_dropped_to_its_footer() {
    let r = plain();
    let body: String = (0..3000)
        .map(|i| format!("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo{i:05}\n"))
        .collect();
    let text = format!(
        "start\n-----BEGIN OPENSSH PRIVATE KEY-----\n{body}-----END OPENSSH PRIVATE KEY-----\nend\n"
    );
    for chunks in [&[7][..], &[4096][..], &[65536][..], &[1, 100, 30000][..]] {
        let out = String::from_utf8(stream(&r, text.as_bytes(), chunks)).unwrap();
        assert_eq!(out, "start\n<redacted>\nend\n", "{chunks:?}");
    }
    let cut = format!("start\n-----BEGIN PRIVATE KEY-----\n{body}");
    let out = String::from_utf8(stream(&r, cut.as_bytes(), &[65536])).unwrap();
    assert_eq!(out, "start\n<redacted>");
}

proptest::proptest! {
    #[test]
    fn an_embedded_secret_never_survives(
        before in "[ -~]{0,40}",
        after in "[ -~]{0,40}",
        which in 0usize..15,
    ) {
        let mut secrets = shaped();
        secrets.push("canary-Zq81xw-p");
        let secret = secrets[which];
        let r = Redactor::from_pairs([("CANARY_PASSWORD", "canary-Zq81xw-p")]);
        // Separated by spaces: a shape glued to word characters is another word.
        let text = format!("{before} {secret} {after}");
        let once = r.redact_str(&text);
        proptest::prop_assert!(!once.contains(secret));
        proptest::prop_assert_eq!(r.redact_str(&once), once.clone());
    }

    /// Random text with secrets at random offsets, written in random chunks: the
    /// file holds none of them and is byte-identical to the text outside the
    /// redacted spans.
    #[test]
    fn streamed_output_is_identical_outside_redacted_spans(
        pieces in proptest::collection::vec(("[a-z0-9 .,;:()\n]{0,300}", 0usize..16), 1..12),
        chunks in proptest::collection::vec(1usize..5000, 1..6),
    ) {
        let mut secrets = shaped();
        secrets.push("canary-Zq81xw-p");
        secrets.push("x");
        let r = Redactor::from_pairs([("CANARY_PASSWORD", "canary-Zq81xw-p")]);
        let mut text = String::new();
        let mut want = String::new();
        for (filler, which) in &pieces {
            text.push_str(filler);
            want.push_str(filler);
            let secret = secrets[*which];
            if secret != "x" {
                text.push_str(&format!(" {secret} "));
                want.push_str(" <redacted> ");
            }
        }
        let out = stream(&r, text.as_bytes(), &chunks);
        let out = String::from_utf8(out).unwrap();
        for s in &secrets[..secrets.len() - 1] {
            proptest::prop_assert!(!out.contains(s));
        }
        proptest::prop_assert_eq!(out, want);
    }
}

/// Redaction as it was before the one-pattern gate: every shape tried in turn.
fn every_shape_in_turn(r: &Redactor, bytes: &[u8]) -> Vec<u8> {
    super::replace_shapes(r.replace_literals(bytes))
}

proptest::proptest! {
    /// The gate in front of the shapes is exact: text made of the shapes' own
    /// prefixes, token characters, escapes and separators redacts to the same
    /// bytes with and without it, and wherever a shape matches the gate does.
    #[test]
    fn the_one_pattern_gate_lets_every_shape_through(
        pieces in proptest::collection::vec(
            proptest::prop_oneof![
                3 => "sk-ant-|sk-|sk-proj-|ghp_|github_pat_|glpat-|AKIA|ASIA|xoxb-|sk_live_|rk_test_|AIza|npm_|eyJ|Bearer |bearer\t|aws_secret_access_key=|Secret_Access_Key: \"|-----BEGIN RSA PRIVATE KEY-----|-----END RSA PRIVATE KEY-----",
                3 => "[A-Za-z0-9]{4,44}",
                2 => "[._\\-/+=:\"' \n]|\\\\n|\\\\t",
            ],
            0..24,
        ),
    ) {
        let text = pieces.concat();
        let r = Redactor::from_pairs([("CANARY_PASSWORD", "canary-Zq81xw-p")]);
        let any_shape = super::SHAPE_RES.iter().any(|(re, _)| re.is_match(text.as_bytes()));
        proptest::prop_assert!(!any_shape || super::may_hold_a_shape(text.as_bytes()), "{text:?}");
        proptest::prop_assert_eq!(
            r.redact_bytes(text.as_bytes()),
            every_shape_in_turn(&r, text.as_bytes()),
            "{:?}", text
        );
    }
}
