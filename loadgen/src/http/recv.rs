//! A fixed receive buffer reused for every response on a connection (no per-request allocation).

pub(crate) struct RecvBuf {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
}

impl RecvBuf {
    pub(crate) fn new(capacity: usize) -> Self {
        RecvBuf {
            buf: vec![0; capacity].into_boxed_slice(),
            start: 0,
            end: 0,
        }
    }

    /// Bytes received and not yet consumed.
    pub(crate) fn data(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    pub(crate) fn consume(&mut self, n: usize) {
        self.start += n;
        if self.start >= self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Room to read into; `None` when the unconsumed bytes fill the whole buffer.
    pub(crate) fn spare(&mut self) -> Option<&mut [u8]> {
        if self.end == self.buf.len() {
            if self.start == 0 {
                return None;
            }
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        Some(&mut self.buf[self.end..])
    }

    pub(crate) fn filled(&mut self, n: usize) {
        self.end += n;
    }

    pub(crate) fn clear(&mut self) {
        self.start = 0;
        self.end = 0;
    }
}
