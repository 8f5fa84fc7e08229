//! A small JSON reader for cargo's `--message-format=json` lines (one document per line). It
//! accepts every valid document; numbers are checked but not kept (no task reads one).

use std::collections::BTreeMap;

/// A parsed JSON value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Number,
    String(String),
    Array(Vec<Value>),
    Object(BTreeMap<String, Value>),
}

impl Value {
    /// The member `key` of an object; `None` for a missing key or a value that is no object.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(members) => members.get(key),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_array(&self) -> &[Value] {
        match self {
            Value::Array(items) => items,
            _ => &[],
        }
    }
}

/// Parses one document; `None` when `text` is not exactly one JSON value (cargo's lines that
/// are not messages, such as a build script's own output, are skipped that way).
pub fn parse(text: &str) -> Option<Value> {
    let mut parser = Parser {
        bytes: text.as_bytes(),
        at: 0,
    };
    let value = parser.value()?;
    parser.whitespace();
    (parser.at == parser.bytes.len()).then_some(value)
}

struct Parser<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        self.whitespace();
        (self.peek() == Some(byte)).then(|| self.at += 1)
    }

    fn literal(&mut self, word: &str, value: Value) -> Option<Value> {
        let end = self.at + word.len();
        (self.bytes.get(self.at..end) == Some(word.as_bytes())).then(|| {
            self.at = end;
            value
        })
    }

    fn value(&mut self) -> Option<Value> {
        self.whitespace();
        match self.peek()? {
            b'n' => self.literal("null", Value::Null),
            b't' => self.literal("true", Value::Bool(true)),
            b'f' => self.literal("false", Value::Bool(false)),
            b'"' => self.string().map(Value::String),
            b'[' => self.array(),
            b'{' => self.object(),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn number(&mut self) -> Option<Value> {
        let start = self.at;
        while matches!(
            self.peek(),
            Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
        ) {
            self.at += 1;
        }
        let text = std::str::from_utf8(&self.bytes[start..self.at]).ok()?;
        text.parse::<f64>().ok().map(|_| Value::Number)
    }

    fn array(&mut self) -> Option<Value> {
        self.eat(b'[')?;
        let mut items = Vec::new();
        if self.eat(b']').is_some() {
            return Some(Value::Array(items));
        }
        loop {
            items.push(self.value()?);
            if self.eat(b']').is_some() {
                return Some(Value::Array(items));
            }
            self.eat(b',')?;
        }
    }

    fn object(&mut self) -> Option<Value> {
        self.eat(b'{')?;
        let mut members = BTreeMap::new();
        if self.eat(b'}').is_some() {
            return Some(Value::Object(members));
        }
        loop {
            self.whitespace();
            let key = self.string()?;
            self.eat(b':')?;
            members.insert(key, self.value()?);
            if self.eat(b'}').is_some() {
                return Some(Value::Object(members));
            }
            self.eat(b',')?;
        }
    }

    /// A string literal, escapes decoded (`\uXXXX` surrogate pairs included).
    fn string(&mut self) -> Option<String> {
        self.eat(b'"')?;
        let mut out = Vec::new();
        loop {
            let byte = self.peek()?;
            self.at += 1;
            match byte {
                b'"' => return String::from_utf8(out).ok(),
                b'\\' => {
                    let escape = self.peek()?;
                    self.at += 1;
                    let decoded = match escape {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.unicode_escape()?,
                        _ => return None,
                    };
                    let mut buffer = [0; 4];
                    out.extend_from_slice(decoded.encode_utf8(&mut buffer).as_bytes());
                }
                _ => out.push(byte),
            }
        }
    }

    /// The character of `\uXXXX` (the `\u` read already), joining a surrogate pair.
    fn unicode_escape(&mut self) -> Option<char> {
        let first = self.hex4()?;
        if (0xD800..0xDC00).contains(&first) {
            self.literal("\\u", Value::Null)?;
            let second = self.hex4()?;
            if !(0xDC00..0xE000).contains(&second) {
                return None;
            }
            char::from_u32(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))
        } else {
            char::from_u32(first)
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = std::str::from_utf8(self.bytes.get(self.at..self.at + 4)?).ok()?;
        self.at += 4;
        u32::from_str_radix(digits, 16).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_cargo_artifact_message() {
        let line = r#"{"reason":"compiler-artifact","package_id":"path+file:///w#x@0.1.0",
            "target":{"kind":["lib","staticlib"],"name":"x"},"profile":{"test":false},
            "executable":null,"fresh":true,"features":[],"n":-1.5e3}"#;
        let message = parse(line).expect("valid");
        assert_eq!(
            message.get("reason").and_then(Value::as_str),
            Some("compiler-artifact")
        );
        let target = message.get("target").expect("target");
        assert_eq!(
            target.get("kind").map(Value::as_array).map(<[_]>::len),
            Some(2)
        );
        assert_eq!(
            message
                .get("profile")
                .and_then(|p| p.get("test"))
                .and_then(Value::as_bool),
            Some(false)
        );
        assert_eq!(message.get("executable"), Some(&Value::Null));
    }

    #[test]
    fn decodes_escapes() {
        let value = parse(r#""a\"b\\c\n\u00e9\ud83d\ude00""#).expect("valid");
        assert_eq!(value.as_str(), Some("a\"b\\c\né😀"));
    }

    #[test]
    fn rejects_what_is_not_one_document() {
        for text in [
            "",
            "warning: x",
            "{\"a\":1} trailing",
            "[1,]",
            "{\"a\"}",
            "\"open",
        ] {
            assert_eq!(parse(text), None, "{text}");
        }
    }
}
