//! An incremental Server-Sent Events parser: bytes in (split anywhere), complete events out.
//!
//! Follows the WHATWG event-stream rules that matter for model APIs: `event:` and `data:`
//! fields, multi-line data joined with `\n`, LF / CRLF / CR line endings, `:` comments, one
//! optional space after the colon, and a leading BOM. `id:` and `retry:` are ignored.

/// One dispatched event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if the event had one.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

/// Feed it chunks as they arrive; it returns the events they complete.
#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
    event: Option<String>,
    data: Option<String>,
    started: bool,
}

impl SseParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds bytes and returns every event completed by them.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        self.buf.extend_from_slice(chunk);
        if !self.started {
            if self.buf.len() < 3 && b"\xEF\xBB\xBF".starts_with(&self.buf) {
                return Vec::new();
            }
            if self.buf.starts_with(b"\xEF\xBB\xBF") {
                self.buf.drain(..3);
            }
            self.started = true;
        }
        let mut events = Vec::new();
        let mut start = 0;
        let mut i = 0;
        while i < self.buf.len() {
            match self.buf[i] {
                b'\n' => {
                    self.line_at(start, i, &mut events);
                    i += 1;
                    start = i;
                }
                b'\r' => {
                    if i + 1 == self.buf.len() {
                        // A CR at the end: wait to see whether an LF follows.
                        break;
                    }
                    self.line_at(start, i, &mut events);
                    i += if self.buf[i + 1] == b'\n' { 2 } else { 1 };
                    start = i;
                }
                _ => i += 1,
            }
        }
        self.buf.drain(..start);
        events
    }

    /// The end of the stream: completes a last line and event not followed by a blank line.
    pub fn finish(&mut self) -> Option<SseEvent> {
        let mut events = Vec::new();
        if !self.buf.is_empty() {
            let rest = std::mem::take(&mut self.buf);
            let line = rest.strip_suffix(b"\r").unwrap_or(&rest);
            self.line(&String::from_utf8_lossy(line), &mut events);
        }
        self.dispatch(&mut events);
        events.pop()
    }

    fn line_at(&mut self, start: usize, end: usize, events: &mut Vec<SseEvent>) {
        let line = String::from_utf8_lossy(&self.buf[start..end]).into_owned();
        self.line(&line, events);
    }

    fn line(&mut self, line: &str, events: &mut Vec<SseEvent>) {
        if line.is_empty() {
            self.dispatch(events);
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = Some(value.to_owned()),
            "data" => match &mut self.data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            _ => {}
        }
    }

    fn dispatch(&mut self, events: &mut Vec<SseEvent>) {
        let event = self.event.take();
        if let Some(data) = self.data.take() {
            events.push(SseEvent { event, data });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(event: Option<&str>, data: &str) -> SseEvent {
        SseEvent {
            event: event.map(str::to_owned),
            data: data.to_owned(),
        }
    }

    fn parse_all(input: &[u8], split: usize) -> Vec<SseEvent> {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        for chunk in input.chunks(split.max(1)) {
            out.extend(p.feed(chunk));
        }
        out.extend(p.finish());
        out
    }

    #[test]
    fn parses_event_and_data_lines() {
        let input = b"event: message_start\ndata: {\"a\":1}\n\ndata: [DONE]\n\n";
        assert_eq!(
            parse_all(input, 1000),
            [ev(Some("message_start"), "{\"a\":1}"), ev(None, "[DONE]")]
        );
    }

    #[test]
    fn joins_multi_line_data() {
        let input = b"data: one\ndata:two\ndata:  three\n\n";
        assert_eq!(parse_all(input, 1000), [ev(None, "one\ntwo\n three")]);
    }

    #[test]
    fn handles_crlf_and_cr_line_endings() {
        let crlf = b"event: e\r\ndata: x\r\n\r\ndata: y\r\n\r\n";
        assert_eq!(parse_all(crlf, 1000), [ev(Some("e"), "x"), ev(None, "y")]);
        let cr = b"data: x\r\rdata: y\r\r";
        assert_eq!(parse_all(cr, 1000), [ev(None, "x"), ev(None, "y")]);
    }

    #[test]
    fn ignores_comments_unknown_fields_and_empty_events() {
        let input = b": keep-alive\nid: 7\nretry: 100\n\nevent: ping\n\ndata: z\n\n";
        // An event without data is not dispatched, and its event name does not leak.
        assert_eq!(parse_all(input, 1000), [ev(None, "z")]);
    }

    #[test]
    fn any_chunk_boundary_gives_the_same_events() {
        let input = "\u{feff}event: a\r\ndata: héllo\r\ndata: wörld\r\n\r\n: c\ndata: [DONE]\n\n"
            .as_bytes();
        let expected = parse_all(input, input.len());
        assert_eq!(
            expected,
            [ev(Some("a"), "héllo\nwörld"), ev(None, "[DONE]")]
        );
        for split in 1..input.len() {
            assert_eq!(
                parse_all(input, split),
                expected,
                "split every {split} bytes"
            );
        }
    }

    #[test]
    fn finish_flushes_a_trailing_event_without_blank_line() {
        let mut p = SseParser::new();
        assert!(p.feed(b"data: [DONE]").is_empty());
        assert_eq!(p.finish(), Some(ev(None, "[DONE]")));
        assert_eq!(p.finish(), None);
    }

    #[test]
    fn line_without_colon_is_a_field_with_empty_value() {
        assert_eq!(parse_all(b"data\n\n", 1000), [ev(None, "")]);
    }
}
