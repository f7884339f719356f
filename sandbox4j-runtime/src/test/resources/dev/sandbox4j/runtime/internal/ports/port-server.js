// A test server for port URLs: answers every HTTP request with what it received (as JSON) and
// logs it to /tmp/requests-PORT.log; echoes WebSocket text frames as "echo:TEXT" (frames written
// by hand, on node's 'upgrade' event); accepts Upgrade: h2c and then echoes raw bytes.
const http = require('http');
const crypto = require('crypto');
const fs = require('fs');
const port = Number(process.argv[2]);
const log = '/tmp/requests-' + port + '.log';
let count = 0;
const server = http.createServer((req, res) => {
  count++;
  fs.appendFileSync(log, req.method + ' ' + req.url + ' ' + JSON.stringify(req.headers) + '\n');
  const body = [];
  req.on('data', (c) => body.push(c));
  req.on('end', () => {
    const b = Buffer.concat(body);
    const out = JSON.stringify({
      method: req.method, url: req.url, headers: req.headers, bodyLength: b.length, count,
    });
    res.writeHead(200, {
      'content-type': 'application/json', 'content-length': Buffer.byteLength(out),
    });
    res.end(out);
  });
});
server.on('upgrade', (req, socket) => {
  if ((req.headers.upgrade || '').toLowerCase() === 'h2c') {
    // Stands in for an HTTP/2 server: accepts the upgrade, then echoes the raw bytes it gets.
    socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n');
    socket.on('data', (d) => socket.write(d));
    socket.on('error', () => {});
    return;
  }
  if ((req.headers.upgrade || '').toLowerCase() !== 'websocket') {
    socket.end('HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
    return;
  }
  fs.appendFileSync(log, 'UPGRADE ' + req.url + ' ' + JSON.stringify(req.headers) + '\n');
  const accept = crypto.createHash('sha1')
    .update(req.headers['sec-websocket-key'] + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11')
    .digest('base64');
  socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n'
    + 'Sec-WebSocket-Accept: ' + accept + '\r\n\r\n');
  let buf = Buffer.alloc(0);
  socket.on('data', (d) => {
    buf = Buffer.concat([buf, d]);
    while (buf.length >= 2) {
      const op = buf[0] & 0x0f;
      let len = buf[1] & 0x7f;
      let off = 2;
      if (len === 126) {
        if (buf.length < 4) return;
        len = buf.readUInt16BE(2);
        off = 4;
      } else if (len === 127) {
        socket.destroy();
        return;
      }
      const masked = (buf[1] & 0x80) !== 0;
      if (buf.length < off + (masked ? 4 : 0) + len) return;
      const mask = masked ? buf.subarray(off, off + 4) : null;
      if (masked) off += 4;
      const payload = Buffer.from(buf.subarray(off, off + len));
      if (mask) for (let i = 0; i < len; i++) payload[i] ^= mask[i % 4];
      buf = buf.subarray(off + len);
      if (op === 8) {
        socket.end(Buffer.from([0x88, 0]));
        return;
      }
      if (op === 1) {
        const msg = Buffer.from('echo:' + payload.toString());
        const head = msg.length < 126
          ? Buffer.from([0x81, msg.length])
          : Buffer.from([0x81, 126, msg.length >> 8, msg.length & 255]);
        socket.write(Buffer.concat([head, msg]));
      }
    }
  });
  socket.on('error', () => {});
});
server.listen(port, '127.0.0.1', () => fs.writeFileSync('/tmp/listening-' + port, 'yes'));
