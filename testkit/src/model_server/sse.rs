//! Server-Sent Events for one assistant message, shaped like the Messages API stream.

use serde_json::{json, Value};

use super::script::{ToolCall, Usage};

/// One content block of a streamed assistant message.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
}

/// Pieces a streamed value is cut into, so clients must reassemble deltas as they do with the real API.
const DELTA_PIECES: usize = 3;

/// The whole event stream of one message: `message_start` … `message_stop`.
pub(super) fn message_events(
    message_id: &str,
    model: &str,
    blocks: &[Block],
    usage: Usage,
) -> String {
    let stop_reason = stop_reason(blocks);
    let mut out = String::new();
    push_event(
        &mut out,
        "message_start",
        &json!({
            "type": "message_start",
            "message": {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": null,
                "stop_sequence": null,
                "usage": {
                    "input_tokens": usage.input_tokens,
                    "output_tokens": 1,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                },
            },
        }),
    );
    for (index, block) in blocks.iter().enumerate() {
        push_block(&mut out, index, block);
    }
    push_event(
        &mut out,
        "message_delta",
        &json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": usage.output_tokens},
        }),
    );
    push_event(&mut out, "message_stop", &json!({"type": "message_stop"}));
    out
}

/// The same message as one JSON object, for requests without `stream: true`.
pub(super) fn message_json(message_id: &str, model: &str, blocks: &[Block], usage: Usage) -> Value {
    let content: Vec<Value> = blocks
        .iter()
        .map(|block| match block {
            Block::Text(text) => json!({"type": "text", "text": text}),
            Block::ToolUse { id, name, input } => {
                json!({"type": "tool_use", "id": id, "name": name, "input": input})
            }
        })
        .collect();
    json!({
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(blocks),
        "stop_sequence": null,
        "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
    })
}

fn stop_reason(blocks: &[Block]) -> &'static str {
    if blocks
        .iter()
        .any(|block| matches!(block, Block::ToolUse { .. }))
    {
        "tool_use"
    } else {
        "end_turn"
    }
}

fn push_block(out: &mut String, index: usize, block: &Block) {
    let (start, deltas) = match block {
        Block::Text(text) => (
            json!({"type": "text", "text": ""}),
            split_pieces(text)
                .into_iter()
                .map(|piece| json!({"type": "text_delta", "text": piece}))
                .collect::<Vec<_>>(),
        ),
        Block::ToolUse { id, name, input } => (
            json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
            // The real API opens with an empty partial_json before the pieces.
            std::iter::once(String::new())
                .chain(split_pieces(&input.to_string()))
                .map(|piece| json!({"type": "input_json_delta", "partial_json": piece}))
                .collect(),
        ),
    };
    push_event(
        out,
        "content_block_start",
        &json!({"type": "content_block_start", "index": index, "content_block": start}),
    );
    for delta in deltas {
        push_event(
            out,
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": index, "delta": delta}),
        );
    }
    push_event(
        out,
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": index}),
    );
}

fn push_event(out: &mut String, event: &str, data: &Value) {
    out.push_str("event: ");
    out.push_str(event);
    out.push_str("\ndata: ");
    out.push_str(&data.to_string());
    out.push_str("\n\n");
}

/// Splits on character boundaries into at most `DELTA_PIECES` non-empty pieces.
fn split_pieces(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    let size = chars.len().div_ceil(DELTA_PIECES);
    chars
        .chunks(size)
        .map(|chunk| chunk.iter().collect())
        .collect()
}

/// Blocks for a scripted tool-use reply, generating ids where the script left them out.
pub(super) fn tool_blocks(
    text: Option<&str>,
    calls: &[ToolCall],
    mut new_id: impl FnMut() -> String,
) -> Vec<Block> {
    text.filter(|text| !text.is_empty())
        .map(|text| Block::Text(text.to_owned()))
        .into_iter()
        .chain(calls.iter().map(|call| Block::ToolUse {
            id: call.id.clone().unwrap_or_else(&mut new_id),
            name: call.name.clone(),
            input: call.input.clone(),
        }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_rejoin_to_the_text_even_with_multibyte_characters() {
        let text = "héllo wörld — ✓";
        let pieces = split_pieces(text);
        assert_eq!(pieces.len(), DELTA_PIECES);
        assert_eq!(pieces.concat(), text);
        assert_eq!(split_pieces("ab"), vec!["a", "b"]);
        assert!(split_pieces("").is_empty());
    }
}
