//! The HTTP/1.1 the loopback fakes speak (the fake Discord, the fake model API, the fake
//! forge): one request read off a keep-alive connection, and the reason phrases of the
//! statuses they answer with.

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

pub struct RawRequest {
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RawRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// True when the client asked to close the connection after this request.
    pub fn wants_close(&self) -> bool {
        self.header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
    }
}

/// A connection's reader, with Nagle off: each reply goes out as soon as it is written.
pub fn connection(stream: TcpStream) -> BufReader<TcpStream> {
    let _ = stream.set_nodelay(true);
    BufReader::new(stream)
}

/// The next request on the connection, `None` once it ended or broke.
pub async fn next_request(reader: &mut BufReader<TcpStream>) -> Option<RawRequest> {
    read_request(reader).await.ok().flatten()
}

/// The next request on the connection (`None` once the client closed it). Bodies come
/// with a `content-length` or chunked; a client that waits for `100 Continue` before its
/// body (libcurl does, for git's large pushes) is told to go on.
async fn read_request(reader: &mut BufReader<TcpStream>) -> std::io::Result<Option<RawRequest>> {
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).await? == 0 {
            return Ok(None);
        }
        if !line.trim().is_empty() {
            break;
        }
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let target = parts.next().unwrap_or("/").to_string();
    let mut headers = Vec::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).await? == 0 {
            return Ok(None);
        }
        let trimmed = line.trim_end();
        if trimmed.is_empty() {
            break;
        }
        if let Some((name, value)) = trimmed.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    let mut request = RawRequest {
        method,
        target,
        headers,
        body: Vec::new(),
    };
    let chunked = request
        .header("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    let expects_continue = request
        .header("expect")
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"));
    if expects_continue {
        let stream = reader.get_mut();
        stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
        stream.flush().await?;
    }
    if chunked {
        loop {
            line.clear();
            reader.read_line(&mut line).await?;
            let size_text = line.trim().split(';').next().unwrap_or("0");
            let size = usize::from_str_radix(size_text, 16).unwrap_or(0);
            if size == 0 {
                // Trailers until an empty line.
                loop {
                    line.clear();
                    if reader.read_line(&mut line).await? == 0 || line.trim().is_empty() {
                        break;
                    }
                }
                break;
            }
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).await?;
            chunk.truncate(size);
            request.body.extend_from_slice(&chunk);
        }
    } else if let Some(length) = request
        .header("content-length")
        .and_then(|v| v.parse::<usize>().ok())
    {
        let mut body = vec![0; length];
        reader.read_exact(&mut body).await?;
        request.body = body;
    }
    Ok(Some(request))
}

pub fn reason(status: u16) -> &'static str {
    match status {
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        302 => "Found",
        304 => "Not Modified",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        410 => "Gone",
        412 => "Precondition Failed",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Unknown",
    }
}
