//! Finding values in RON source by path, for error locations and `--set` overrides.
//!
//! `ron` deserializes into typed structs and forgets where each value came from. Checks
//! that run after parsing (an edge naming an unknown node, a model name that is not
//! declared) still need to point at the exact spot in the file, so this module parses the
//! source a second time into a light tree that keeps byte spans and nothing else. It only
//! runs on text `ron` has already accepted, so it can be simple: on anything unexpected it
//! gives up and the diagnostic goes without a location.

use super::diagnostic::ByteSpan;

/// One step of a path into a pipeline file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seg {
    /// A named field of a struct-like value: `steps`, `nodes`.
    Field(String),
    /// The `n`-th entry (0-based, in file order) with this key in a `{ "k": v }` map.
    Key(String, usize),
    /// The `i`-th element of a list or tuple.
    Index(usize),
}

/// Shorthand constructors, so a path reads like the file: `[field("nodes"), key("adv")]`.
pub fn field(name: &str) -> Seg {
    Seg::Field(name.to_string())
}

pub fn key(name: &str) -> Seg {
    Seg::Key(name.to_string(), 0)
}

/// A parsed RON value with spans.
#[derive(Debug)]
pub(crate) struct Node {
    /// The whole value.
    pub span: ByteSpan,
    /// The value's first token (a variant name, a string, a number, an opening bracket).
    pub head: ByteSpan,
    pub body: Body,
}

#[derive(Debug)]
pub(crate) enum Body {
    Atom,
    /// Named fields; `open` is the position right after `(`.
    Struct {
        open: usize,
        fields: Vec<(String, ByteSpan, Node)>,
    },
    Seq(Vec<Node>),
    Map(Vec<(String, ByteSpan, Node)>),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Tok {
    Ident,
    Str,
    Other,
    Punct(u8),
}

struct Lexer {
    toks: Vec<(Tok, ByteSpan)>,
}

impl Lexer {
    fn run(src: &str) -> Option<Vec<(Tok, ByteSpan)>> {
        let mut lx = Lexer { toks: Vec::new() };
        let bytes = src.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let c = bytes[i];
            let start = i;
            i = match c {
                b' ' | b'\t' | b'\r' | b'\n' => i + 1,
                b'/' if bytes.get(i + 1) == Some(&b'/') => {
                    src[i..].find('\n').map_or(bytes.len(), |n| i + n)
                }
                b'/' if bytes.get(i + 1) == Some(&b'*') => skip_block_comment(bytes, i)?,
                b'"' => lx.push(Tok::Str, start, skip_string(bytes, i + 1)?),
                b'r' if matches!(bytes.get(i + 1), Some(b'"') | Some(b'#')) => {
                    lx.push(Tok::Str, start, skip_raw_string(src, i + 1)?)
                }
                b'\'' => lx.push(Tok::Other, start, skip_char(bytes, i + 1)?),
                b'(' | b')' | b'[' | b']' | b'{' | b'}' | b':' | b',' => {
                    lx.push(Tok::Punct(c), start, i + 1)
                }
                c if c.is_ascii_alphabetic() || c == b'_' => {
                    let end = scan(bytes, i, |b| b.is_ascii_alphanumeric() || b == b'_');
                    lx.push(Tok::Ident, start, end)
                }
                _ => {
                    // A whole character: a non-ASCII one (a BOM, `…`) is one token too.
                    let width = src.get(i..).and_then(|s| s.chars().next());
                    let width = width.map_or(1, char::len_utf8);
                    let end = scan(bytes, i + width, |b| {
                        b.is_ascii_alphanumeric() || b"._+-".contains(&b)
                    });
                    lx.push(Tok::Other, start, end)
                }
            };
        }
        Some(lx.toks)
    }

    fn push(&mut self, tok: Tok, start: usize, end: usize) -> usize {
        self.toks.push((tok, ByteSpan { start, end }));
        end
    }
}

fn scan(bytes: &[u8], mut i: usize, keep: impl Fn(u8) -> bool) -> usize {
    while i < bytes.len() && keep(bytes[i]) {
        i += 1;
    }
    i
}

fn skip_block_comment(bytes: &[u8], mut i: usize) -> Option<usize> {
    let mut depth = 0usize;
    while i + 1 < bytes.len() {
        match (bytes[i], bytes[i + 1]) {
            (b'/', b'*') => {
                depth += 1;
                i += 2;
            }
            (b'*', b'/') => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => i += 1,
        }
    }
    None
}

fn skip_string(bytes: &[u8], mut i: usize) -> Option<usize> {
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

fn skip_raw_string(src: &str, i: usize) -> Option<usize> {
    let hashes = src[i..].bytes().take_while(|&b| b == b'#').count();
    let body = i + hashes + 1;
    let close = format!("\"{}", "#".repeat(hashes));
    src.get(body..)?
        .find(&close)
        .map(|n| body + n + close.len())
}

fn skip_char(bytes: &[u8], mut i: usize) -> Option<usize> {
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'\'' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

struct Parser<'a> {
    src: &'a str,
    toks: Vec<(Tok, ByteSpan)>,
    pos: usize,
    /// Values open around the current one.
    depth: usize,
}

/// The deepest nesting parsed: `ron`'s own recursion limit, so this recursive parser never
/// overflows the stack on text `ron` would refuse anyway (a `--set` value of 20,000 `[`).
const MAX_DEPTH: usize = 128;

impl Parser<'_> {
    fn peek(&self) -> Option<(Tok, ByteSpan)> {
        self.toks.get(self.pos).copied()
    }

    fn peek_at(&self, n: usize) -> Option<Tok> {
        self.toks.get(self.pos + n).map(|t| t.0)
    }

    fn next(&mut self) -> Option<(Tok, ByteSpan)> {
        let t = self.peek()?;
        self.pos += 1;
        Some(t)
    }

    fn text(&self, span: ByteSpan) -> &str {
        self.src.get(span.start..span.end).unwrap_or("")
    }

    fn value(&mut self) -> Option<Node> {
        if self.depth >= MAX_DEPTH {
            return None;
        }
        self.depth += 1;
        let node = self.nested_value();
        self.depth -= 1;
        node
    }

    fn nested_value(&mut self) -> Option<Node> {
        let (tok, head) = self.next()?;
        let body = match tok {
            Tok::Ident if self.peek_at(0) == Some(Tok::Punct(b'(')) => {
                self.pos += 1;
                self.parens()?
            }
            Tok::Punct(b'(') => self.parens()?,
            Tok::Punct(b'[') => Body::Seq(self.seq(b']')?),
            Tok::Punct(b'{') => Body::Map(self.map()?),
            Tok::Ident | Tok::Str | Tok::Other => Body::Atom,
            Tok::Punct(_) => return None,
        };
        let end = self.toks[self.pos - 1].1.end;
        Some(Node {
            span: ByteSpan {
                start: head.start,
                end,
            },
            head,
            body,
        })
    }

    /// After `(`: named fields or tuple elements.
    fn parens(&mut self) -> Option<Body> {
        let open = self.toks[self.pos - 1].1.end;
        let named =
            self.peek_at(0) == Some(Tok::Ident) && self.peek_at(1) == Some(Tok::Punct(b':'));
        if !named {
            return Some(Body::Seq(self.seq(b')')?));
        }
        let mut fields = Vec::new();
        while self.peek()?.0 != Tok::Punct(b')') {
            let (_, name) = self.next()?;
            self.expect(b':')?;
            let value = self.value()?;
            fields.push((self.text(name).to_string(), name, value));
            self.comma(b')')?;
        }
        self.pos += 1;
        Some(Body::Struct { open, fields })
    }

    fn seq(&mut self, close: u8) -> Option<Vec<Node>> {
        let mut items = Vec::new();
        while self.peek()?.0 != Tok::Punct(close) {
            items.push(self.value()?);
            self.comma(close)?;
        }
        self.pos += 1;
        Some(items)
    }

    fn map(&mut self) -> Option<Vec<(String, ByteSpan, Node)>> {
        let mut entries = Vec::new();
        while self.peek()?.0 != Tok::Punct(b'}') {
            let key = self.value()?;
            self.expect(b':')?;
            let value = self.value()?;
            let text = self.text(key.span).trim_matches('"').to_string();
            entries.push((text, key.span, value));
            self.comma(b'}')?;
        }
        self.pos += 1;
        Some(entries)
    }

    fn expect(&mut self, p: u8) -> Option<()> {
        (self.next()?.0 == Tok::Punct(p)).then_some(())
    }

    fn comma(&mut self, close: u8) -> Option<()> {
        match self.peek()?.0 {
            Tok::Punct(b',') => {
                self.pos += 1;
                Some(())
            }
            Tok::Punct(c) if c == close => Some(()),
            _ => None,
        }
    }
}

/// Parses RON source into a span tree; `None` when the text is not RON this parser knows.
pub(crate) fn parse(src: &str) -> Option<Node> {
    let toks = Lexer::run(src)?;
    let mut parser = Parser {
        src,
        toks,
        pos: 0,
        depth: 0,
    };
    // Skip `#![enable(...)]` extension attributes.
    while skip_attribute(&mut parser) {}
    parser.value()
}

fn skip_attribute(parser: &mut Parser) -> bool {
    let Some((_, span)) = parser.peek() else {
        return false;
    };
    if !parser.text(span).starts_with('#') {
        return false;
    }
    parser.pos += 1;
    let mut depth = 0i32;
    while let Some((tok, _)) = parser.next() {
        match tok {
            Tok::Punct(b'[') => depth += 1,
            Tok::Punct(b']') => {
                depth -= 1;
                if depth <= 0 {
                    return true;
                }
            }
            _ => {}
        }
    }
    false
}

impl Node {
    /// The child at one path step.
    pub(crate) fn child(&self, seg: &Seg) -> Option<&Node> {
        match (seg, &self.body) {
            (Seg::Field(name), Body::Struct { fields, .. }) => {
                fields.iter().find(|(n, _, _)| n == name).map(|(_, _, v)| v)
            }
            (Seg::Key(name, nth), Body::Map(entries)) => entries
                .iter()
                .filter(|(k, _, _)| k == name)
                .nth(*nth)
                .map(|(_, _, v)| v),
            (Seg::Index(i), Body::Seq(items)) => items.get(*i),
            // A newtype variant such as `Some(x)` or `Step(x)`: look inside its one element.
            (_, Body::Seq(items)) if items.len() == 1 => items[0].child(seg),
            _ => None,
        }
    }

    pub(crate) fn find(&self, path: &[Seg]) -> Option<&Node> {
        path.iter().try_fold(self, |node, seg| node.child(seg))
    }

    /// The span of the key or field name of the last path step.
    pub(crate) fn name_span(&self, path: &[Seg]) -> Option<ByteSpan> {
        let (last, parent) = path.split_last()?;
        match (last, &self.find(parent)?.body) {
            (Seg::Field(name), Body::Struct { fields, .. }) => fields
                .iter()
                .find(|(n, _, _)| n == name)
                .map(|(_, s, _)| *s),
            (Seg::Key(name, nth), Body::Map(entries)) => entries
                .iter()
                .filter(|(k, _, _)| k == name)
                .nth(*nth)
                .map(|(_, s, _)| *s),
            _ => None,
        }
    }
}

/// The first identifier of `src`, after comments and `#![enable(..)]` attributes: tells a
/// pipeline file (`Pipeline(`) from an env spec (`FrozenLake(`) before parsing either.
pub fn first_identifier(src: &str) -> Option<&str> {
    let toks = Lexer::run(src)?;
    let mut depth = 0i32;
    for (tok, span) in toks {
        match tok {
            Tok::Punct(b'[') => depth += 1,
            Tok::Punct(b']') => depth -= 1,
            Tok::Ident if depth == 0 => return src.get(span.start..span.end),
            _ => {}
        }
    }
    None
}

/// Where the last token of `src` ends, comments and whitespace after it skipped: the end
/// of the value before a missing `,`.
pub(crate) fn last_token_end(src: &str) -> Option<usize> {
    Lexer::run(src)?.last().map(|(_, span)| span.end)
}

/// The span of the value's first token at `path` in `src`.
pub fn value_head(src: &str, path: &[Seg]) -> Option<ByteSpan> {
    parse(src)?.find(path).map(|n| n.head)
}

/// The span of the key (map) or field name at the end of `path`.
pub fn name_span(src: &str, path: &[Seg]) -> Option<ByteSpan> {
    parse(src)?.name_span(path)
}

#[cfg(test)]
#[path = "locate_tests.rs"]
mod tests;
