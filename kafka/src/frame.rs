//! Kafka's framing: every request and response is a 4-byte big-endian signed size followed
//! by that many bytes. The size is checked against `socket.request.max.bytes` before anything
//! is buffered, so a peer announcing a huge request costs four bytes of reading.

/// Bytes of the size prefix.
pub const SIZE_PREFIX_BYTES: usize = 4;

/// The smallest request: API key, API version and correlation id.
pub const REQUEST_HEAD_BYTES_MIN: usize = 8;

/// A size prefix that cannot start a request.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("request of {size_bytes} bytes is above socket.request.max.bytes ({max_bytes})")]
    TooLarge { size_bytes: u32, max_bytes: u32 },
    #[error("negative request size {size}")]
    NegativeSize { size: i32 },
    #[error("request of {size_bytes} bytes is shorter than a request header ({REQUEST_HEAD_BYTES_MIN} bytes)")]
    TooShort { size_bytes: u32 },
}

/// The number of bytes that follow `prefix`, or why the connection must close.
pub fn request_len(prefix: [u8; SIZE_PREFIX_BYTES], max_bytes: u32) -> Result<usize, FrameError> {
    let size = i32::from_be_bytes(prefix);
    if size < 0 {
        return Err(FrameError::NegativeSize { size });
    }
    let size_bytes = size as u32;
    if size_bytes > max_bytes {
        return Err(FrameError::TooLarge {
            size_bytes,
            max_bytes,
        });
    }
    if (size_bytes as usize) < REQUEST_HEAD_BYTES_MIN {
        return Err(FrameError::TooShort { size_bytes });
    }
    Ok(size_bytes as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_checked_before_reading() {
        assert_eq!(request_len(12i32.to_be_bytes(), 100), Ok(12));
        assert_eq!(request_len(100i32.to_be_bytes(), 100), Ok(100));
        assert_eq!(
            request_len(101i32.to_be_bytes(), 100),
            Err(FrameError::TooLarge {
                size_bytes: 101,
                max_bytes: 100
            })
        );
        assert_eq!(
            request_len((-1i32).to_be_bytes(), 100),
            Err(FrameError::NegativeSize { size: -1 })
        );
        assert_eq!(
            request_len(7i32.to_be_bytes(), 100),
            Err(FrameError::TooShort { size_bytes: 7 })
        );
    }
}
