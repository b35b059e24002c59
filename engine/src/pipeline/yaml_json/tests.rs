use proptest::prelude::*;

use super::*;

/// The general reading, as `load` does it when this one declines; None where it
/// fails (not YAML, a duplicate key, too deep).
fn general(text: &str) -> Option<Value> {
    let yaml: serde_yaml::Value = serde_yaml::from_str(text).ok()?;
    Some(super::super::load::yaml_to_json(&yaml))
}

/// Both ways of reading (on this thread alone, and parsing on a second), which
/// must agree.
fn plain(text: &str) -> Option<Value> {
    let alone = read(text, false);
    assert_eq!(
        read(text, true),
        alone,
        "the pipelined reading differs: {text}"
    );
    match alone {
        Plain::Read(value) => Some(value),
        Plain::Declined | Plain::TooDeep(_) => None,
    }
}

#[test]
fn plain_documents_read_the_same_as_the_general_way() {
    for text in [
        "version: 1\nname: x\nstages:\n  - { id: a, kind: check, argv: [sh, -c, 'true'] }\n",
        "a: 1\nb: -2\nc: 1.5\nd: .nan\ne: .inf\nf: ~\ng: true\nh: 'yes'\ni: yes\nj: 0x1f\n",
        "1: one\ntrue: t\nnull: n\n-3: m\n0x10: hex\n'': empty\nnested: { list: [1, [2, {k: v}]], empty: {} }\n",
        "s: |\n  block\n  text\nf: >-\n  folded\n  text\nq: \"esc \\u00e9 \\n\"\nanchor: &a [1, 2]\n",
        "- just\n- a\n- list\n",
        "plain scalar\n",
        "--- \nk: explicit document\n...\n",
        "",
        "\n",
        "# nothing but a comment\n",
        "---\n",
        "%YAML 1.2\n---\nk: v\n",
        "a: 0123\nb: -0.5e3\nc: +12\nd: 1_000\ne: .5\nf: 1.\ng: inf\nh: -.INF\ni: 0o17\nj: -0b101\n",
        "k:\nl: [~, '', \"\"]\n",
        "stages:\n  - id: a\n    needs: [b, c]\n    prompt: |\n      Write {{ x }}.\n    # a comment\n  - id: b\n",
    ] {
        let got = plain(text);
        assert!(got.is_some(), "declined a plain document: {text}");
        assert_eq!(got, general(text), "{text}");
    }
}

#[test]
fn what_only_the_general_reading_handles_is_declined() {
    for text in [
        "a: !tagged 1\n",
        "a: !!str 1\n",
        "a: !!map {}\n",
        "? [1, 2]\n: list key\n",
        "? {k: v}\n: map key\n",
        "a: 1\na: 2\n",
        "1: a\n'1': b\n",
        "a: [1, 2\n",
        "a: 1\n---\nb: 2\n",
        "anchor: &a [1, 2]\nalias: *a\n",
        "big: 18446744073709551616\n",
        "small: -9223372036854775809\n",
        "1.5: float key\n",
        "a: \"\\xff\\ud800\"\n",
    ] {
        assert_eq!(plain(text), None, "{text}");
    }
}

/// serde_yaml's error for a document, as the general reading gives it.
fn general_error(text: &str) -> String {
    serde_yaml::from_str::<serde_yaml::Value>(text)
        .unwrap_err()
        .to_string()
}

#[test]
fn nesting_one_level_past_serde_yaml_s_limit_is_its_error_at_its_place() {
    let lists = |n: usize| format!("{}1{}\n", "[".repeat(n), "]".repeat(n));
    let maps = |n: usize| format!("{}1{}\n", "{a: ".repeat(n), "}".repeat(n));
    // n - 1 mappings in block style, then a list.
    let block = |n: usize| {
        let mut text = String::new();
        for i in 0..n - 1 {
            text.push_str(&format!("{}k{i}:\n", " ".repeat(i)));
        }
        text.push_str(&format!("{}- x\n", " ".repeat(n - 1)));
        text
    };
    // A mapping and a list in block style, then flow lists and mappings.
    let mixed = |n: usize| {
        let (pairs, odd) = ((n - 2) / 2, (n - 2) % 2);
        let open = format!("{}{}", "[".repeat(odd), "[{k: ".repeat(pairs));
        let close = format!("{}{}", "}]".repeat(pairs), "]".repeat(odd));
        format!("stages:\n  - {open}1{close}\n")
    };
    for (name, nest) in [
        ("lists", &lists as &dyn Fn(usize) -> String),
        ("maps", &maps),
        ("block", &block),
        ("mixed", &mixed),
    ] {
        let deepest = nest(MAX_DEPTH);
        assert!(plain(&deepest).is_some(), "{name}: the deepest read");
        assert_eq!(plain(&deepest), general(&deepest), "{name}");
        for n in [MAX_DEPTH + 1, MAX_DEPTH + 2, 3 * MAX_DEPTH] {
            let text = nest(n);
            let Plain::TooDeep(at) = read(&text, false) else {
                panic!("{name} {n}: not refused as too deep");
            };
            assert_eq!(read(&text, true), Plain::TooDeep(at), "{name} {n}");
            let want = format!(
                "recursion limit exceeded at line {} column {}",
                at.line, at.column
            );
            assert_eq!(general_error(&text), want, "{name} {n}");
        }
    }
}

/// libyaml's time grows with the square of an unclosed flow's depth: the
/// general reading of this took minutes. Refused as too deep, the general
/// reading never sees it.
#[test]
fn a_hostile_depth_is_refused_without_the_general_reading() {
    let text = format!("version: 1\nstages: {}", "[".repeat(200_000));
    let want = Plain::TooDeep(Mark {
        line: 2,
        column: 8 + MAX_DEPTH,
    });
    assert_eq!(read(&text, true), want);
    assert_eq!(read(&text, false), want);
}

/// A document too deep and then declined, or broken, right after, within one
/// hand-off between the threads: too deep, both ways.
#[test]
fn too_deep_is_found_before_a_decline_that_follows_it() {
    let deep = format!("a: {}1{}\n", "[".repeat(130), "]".repeat(130));
    for text in [format!("{deep}b: !t 1\n"), format!("{deep}b: [1\n")] {
        let Plain::TooDeep(at) = read(&text, false) else {
            panic!("not too deep: {text}");
        };
        assert_eq!(read(&text, true), Plain::TooDeep(at));
        assert_eq!(
            general_error(&text),
            format!(
                "recursion limit exceeded at line {} column {}",
                at.line, at.column
            )
        );
    }
}

/// A document declined before its depth is reached is still followed for its
/// depth: the general reading is never handed a hostile one. A tag or an alias
/// changes nothing in serde_yaml's error; a key given twice is serde_yaml's
/// error first, and the file is refused either way.
#[test]
fn a_document_declined_early_is_still_refused_when_too_deep() {
    let deep = format!("{}1{}\n", "[".repeat(200), "]".repeat(200));
    for (text, same_error) in [
        (format!("a: !t 1\nb: {deep}"), true),
        (format!("a: &x 1\nb: *x\nc: !t {deep}"), true),
        (format!("a: 1\na: 2\nb: {deep}"), false),
        (format!("? [k]\n: v\nb: {deep}"), true),
    ] {
        let Plain::TooDeep(at) = read(&text, false) else {
            panic!("not too deep: {text}");
        };
        assert_eq!(read(&text, true), Plain::TooDeep(at), "{text}");
        let general = general_error(&text);
        if same_error {
            let want = format!(
                "recursion limit exceeded at line {} column {}",
                at.line, at.column
            );
            assert_eq!(general, want, "{text}");
        } else {
            assert!(general.starts_with("duplicate entry"), "{general}");
        }
    }
    // Shallow enough, a declined document is the general reading's: deep once,
    // or with more lists side by side than the limit, each closed.
    let siblings = format!("a: !t 1\nb: [{}]\n", "[1], ".repeat(200));
    let once = format!("a: !t 1\nb: {}1{}\n", "[".repeat(100), "]".repeat(100));
    for shallow in [once, siblings] {
        assert_eq!(read(&shallow, false), Plain::Declined, "{shallow}");
        assert_eq!(read(&shallow, true), Plain::Declined, "{shallow}");
        assert!(general(&shallow).is_some());
    }
}

/// Where libyaml fails before the depth is reached, the general reading
/// reports that failure (and parses no deeper than the plain one did).
#[test]
fn not_yaml_before_the_depth_is_the_general_reading_s_error() {
    let text = format!("a: b: c\nd: {}", "[".repeat(200_000));
    assert_eq!(read(&text, false), Plain::Declined);
    assert_eq!(read(&text, true), Plain::Declined);
    assert!(general_error(&text).starts_with("mapping values are not allowed"));
}

fn generated(stages: usize) -> String {
    let mut text = String::from("version: 1\nname: many\nstages:\n");
    for i in 0..stages {
        let needs = if i == 0 {
            String::new()
        } else {
            format!("s{}", i / 2)
        };
        text.push_str(&format!(
            "  - {{ id: s{i}, kind: check, needs: [{needs}], argv: [sh, -c, \"true && touch out/s{i}\"], sandbox: off }}\n"
        ));
    }
    text
}

#[test]
fn a_generated_pipeline_of_many_stages_is_read_the_plain_way() {
    let text = generated(1000);
    assert!(
        text.len() >= PIPELINED_FROM,
        "large enough to be read on two threads"
    );
    let Plain::Read(got) = plain_yaml_to_json(&text) else {
        panic!("declined");
    };
    assert_eq!(Some(&got), general(&text).as_ref());
    assert_eq!(read(&text, false), Plain::Read(got));
}

/// A large document declined by the builder early (the parser still going),
/// by the parser late (a tag, an alias, broken YAML), or at its very end.
#[test]
fn a_large_document_declined_anywhere_is_declined_on_two_threads_too() {
    let body = generated(1000);
    let (head, tail) = body.split_at(body.find("stages:").unwrap());
    for text in [
        format!("version: 1\nversion: 2\n{tail}"),
        format!("{body}  - {{ id: late, argv: !tag [x] }}\n"),
        format!("{head}anchor: &a 1\n{tail}  - {{ id: late, argv: *a }}\n"),
        format!("{body}  - {{ id: broken, argv: [x\n"),
        format!("{body}---\nsecond: document\n"),
    ] {
        assert!(text.len() >= PIPELINED_FROM);
        assert_eq!(
            read(&text, true),
            Plain::Declined,
            "{}",
            &text[text.len() - 60..]
        );
        assert_eq!(read(&text, false), Plain::Declined);
    }
}

/// The rules' edges, one by one: every one of these reads as serde_yaml reads it.
#[test]
fn edge_scalars_resolve_as_serde_yaml_resolves_them() {
    for s in [
        "0",
        "-0",
        "+0",
        "00",
        "01",
        "-01",
        "+01",
        "0.0",
        "00.5",
        "-00.5",
        "0x",
        "0x1F",
        "0x+1",
        "+0x1",
        "-0x1",
        "-0x-1",
        "0o17",
        "0o8",
        "-0o7",
        "0b101",
        "0b2",
        "-0b1",
        "+-1",
        "-+1",
        "++1",
        "1e3",
        "1E+3",
        "-1e-3",
        ".5",
        "5.",
        "+.5",
        "1_000",
        ".inf",
        "-.inf",
        "+.inf",
        ".Inf",
        "-.INF",
        ".nan",
        ".NaN",
        "+.nan",
        "-.nan",
        "inf",
        "-inf",
        "nan",
        "Infinity",
        "~",
        "null",
        "Null",
        "NULL",
        "nULL",
        "true",
        "True",
        "TRUE",
        "tRUE",
        "false",
        "False",
        "FALSE",
        "yes",
        "No",
        "on",
        "18446744073709551615",
        "-9223372036854775808",
        "9223372036854775808",
        "1.7976931348623157e308",
        "1e309",
        "-1e309",
    ] {
        // As a value and in a list it is read here; as a key, unless a float.
        for text in [format!("k: {s}\n"), format!("[{s}]\n")] {
            let got = plain(&text);
            assert!(got.is_some(), "declined {text}");
            assert_eq!(got, general(&text), "{text}");
        }
        let as_key = format!("{s}: v\n");
        match plain(&as_key) {
            Some(got) => assert_eq!(Some(got), general(&as_key), "{as_key}"),
            None => assert!(
                matches!(resolve(s), Some(Scalar::Float(_))),
                "declined {as_key}"
            ),
        }
    }
}

/// Scalars made of what numbers, nulls and booleans are made of, so that the
/// rules' edges (signs, prefixes, leading zeros, exponents, `.inf`) come up often.
fn number_like() -> impl Strategy<Value = String> {
    prop_oneof![
        "[-+]?(0[xob])?[0-9a-fA-F_]{0,4}",
        "[-+]{0,2}[0-9]{0,3}\\.?[0-9]{0,3}([eE][-+]?[0-9]{1,3})?",
        "[-+]?\\.(inf|Inf|INF|nan|NaN|NAN|iNf)",
        "[-+]?(inf|nan|infinity|Infinity)",
        "[0-9]{18,22}",
        "-[0-9]{18,22}",
        "(~|null|Null|NULL|nULL|true|True|TRUE|tRue|false|False|FALSE|yes|no|on)",
    ]
}

proptest! {
    /// A plain scalar means the same here as to serde_yaml, as a value and as
    /// a key; only integers wider than 64 bits (and float keys) are declined.
    #[test]
    fn a_plain_scalar_resolves_as_serde_yaml_resolves_it(s in number_like()) {
        let as_value = format!("k: {s}\n");
        let as_key = format!("{s}: v\n");
        let general_value = general(&as_value);
        match plain(&as_value) {
            Some(got) => prop_assert_eq!(Some(got), general_value, "{}", as_value),
            None => {
                let wide = unsigned(&s, u128::from_str_radix).is_some()
                    || negative(&s, i128::from_str_radix).is_some();
                // Declined only when too wide, or when libyaml cannot read it
                // (a lone `-`), which the general reading then reports.
                prop_assert!(wide || general_value.is_none(), "declined {}", as_value);
            }
        }
        if let Some(got) = plain(&as_key) {
            prop_assert_eq!(Some(got), general(&as_key), "{}", as_key);
        }
    }
}

/// A random document in the shapes pipelines take.
#[derive(Debug, Clone)]
enum Doc {
    Plain(String),
    Quoted(String),
    List(Vec<Doc>),
    Map(Vec<(String, Doc)>),
}

fn doc() -> impl Strategy<Value = Doc> {
    let leaf = prop_oneof![
        3 => "[a-z][a-z0-9_./-]{0,8}".prop_map(Doc::Plain),
        2 => number_like().prop_map(Doc::Plain),
        2 => "[ -~\u{e9}\u{1F600}]{0,10}".prop_map(Doc::Quoted),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5).prop_map(Doc::List),
            proptest::collection::vec(("(id|kind|needs|argv|x|1|true|~|0x1|-2)", inner), 0..5)
                .prop_map(Doc::Map),
        ]
    })
}

/// A double-quoted YAML string for any text.
fn quoted(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn flow(d: &Doc) -> String {
    match d {
        Doc::Plain(s) => s.clone(),
        Doc::Quoted(s) => quoted(s),
        Doc::List(items) => format!(
            "[{}]",
            items.iter().map(flow).collect::<Vec<_>>().join(", ")
        ),
        Doc::Map(entries) => format!(
            "{{{}}}",
            entries
                .iter()
                .map(|(k, v)| format!("{k}: {}", flow(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Block style, switching to flow style for collections at random depths.
fn block(d: &Doc, indent: usize, out: &mut String, flip: &mut impl FnMut() -> bool) {
    let pad = " ".repeat(indent);
    match d {
        Doc::List(items) if !items.is_empty() && flip() => {
            for item in items {
                out.push_str(&format!("{pad}-"));
                nested(item, indent + 2, out, flip);
            }
        }
        Doc::Map(entries) if !entries.is_empty() && flip() => {
            for (k, v) in entries {
                out.push_str(&format!("{pad}{k}:"));
                nested(v, indent + 2, out, flip);
            }
        }
        other => out.push_str(&format!("{pad}{}\n", flow(other))),
    }
}

fn nested(d: &Doc, indent: usize, out: &mut String, flip: &mut impl FnMut() -> bool) {
    match d {
        Doc::List(items) if !items.is_empty() => {
            out.push('\n');
            block(d, indent, out, flip);
        }
        Doc::Map(entries) if !entries.is_empty() => {
            out.push('\n');
            block(d, indent, out, flip);
        }
        leaf => out.push_str(&format!(" {}\n", flow(leaf))),
    }
}

/// Why this reading may decline a document the general one reads: a key given
/// twice once printed (`1` and `0x1` are both `1`), or an integer too wide.
fn declinable(d: &Doc) -> bool {
    match d {
        Doc::Plain(s) => {
            unsigned(s, u128::from_str_radix).is_some()
                || negative(s, i128::from_str_radix).is_some()
        }
        Doc::Quoted(_) => false,
        Doc::List(items) => items.iter().any(declinable),
        Doc::Map(entries) => {
            let mut keys = std::collections::HashSet::new();
            let twice = entries.iter().any(|(k, _)| {
                let printed = match k.as_str() {
                    "0x1" => "1",
                    "~" => "null",
                    k => k,
                };
                !keys.insert(printed)
            });
            twice || entries.iter().any(|(_, v)| declinable(v))
        }
    }
}

proptest! {
    /// Whatever this reading accepts, the general one reads the same; what the
    /// general one refuses, this one declines (so the general one reports it).
    #[test]
    fn a_random_document_reads_as_the_general_reading_reads_it(
        d in doc(),
        flips in proptest::collection::vec(any::<bool>(), 64),
    ) {
        let mut at = 0;
        let mut flip = || { at += 1; flips[at % flips.len()] };
        let mut text = String::new();
        block(&d, 0, &mut text, &mut flip);
        for text in [text, flow(&d)] {
            let want = general(&text);
            match plain(&text) {
                Some(got) => prop_assert_eq!(Some(got), want, "{}", text),
                // Declined: for a reason this reading has, or because the
                // general one fails too (a lone `-` or an empty item is no YAML).
                None => prop_assert!(want.is_none() || declinable(&d), "declined {}", text),
            }
        }
    }
}
