// mbsim's motion viewer: plays the motion packed into this page by `mbsim export` (mbsim/output/viewer.py).
// Plain WebGL (2, or 1 with OES_element_index_uint), no library and nothing fetched: the page works
// opened from disk. The data: a JSON header and one zlib stream (base64) holding the meshes (float32
// positions and normals, uint32 indices) and per run its key times (float64), the body translations
// and rotations as integer steps (quantised, differenced along time, zigzag-coded, byte planes).
"use strict";
(function () {
  const header = JSON.parse(document.getElementById("mbsim-header").textContent);
  const status = document.getElementById("status");
  const canvas = document.getElementById("view");
  const slider = document.getElementById("time");
  const clock = document.getElementById("clock");
  const playButton = document.getElementById("play");
  const speedSelect = document.getElementById("speed");
  const api = { ready: false };
  window.mbsim = api;

  function fail(message) {
    status.textContent = message;
    status.className = "error";
    console.error("mbsim viewer: " + message);
  }

  // ---- data ----------------------------------------------------------------------------------
  async function inflate(base64) {
    const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }

  function reader(bytes) {
    let at = 0;
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    // n little-endian values of a DataView getter, size bytes each
    function values(n, size, Type, get) {
      const out = new Type(n);
      for (let i = 0; i < n; i++) out[i] = get.call(view, at + size * i, true);
      at += size * n;
      return out;
    }
    return {
      float32: (n) => values(n, 4, Float32Array, view.getFloat32),
      float64: (n) => values(n, 8, Float64Array, view.getFloat64),
      uint32: (n) => values(n, 4, Uint32Array, view.getUint32),
      // n int32 values stored as 4 byte planes of zigzag codes
      zigzag(n) {
        const out = new Int32Array(n);
        for (let i = 0; i < n; i++) {
          const u = (bytes[at + i] | (bytes[at + n + i] << 8) | (bytes[at + 2 * n + i] << 16) | (bytes[at + 3 * n + i] << 24)) >>> 0;
          out[i] = (u >>> 1) ^ -(u & 1);
        }
        at += 4 * n;
        return out;
      },
    };
  }

  // (bodies, width, keys) integer steps -> Float32Array (bodies, keys, width) of values
  function undifference(steps, bodies, width, keys, quantum, origin) {
    const out = new Float32Array(bodies * keys * width);
    for (let b = 0; b < bodies; b++) {
      for (let c = 0; c < width; c++) {
        let sum = 0;
        const base = (b * width + c) * keys;
        for (let k = 0; k < keys; k++) {
          sum += steps[base + k];
          out[(b * keys + k) * width + c] = origin[c] + sum * quantum;
        }
      }
    }
    return out;
  }

  // ---- small matrix helpers (column-major 4x4) -------------------------------------------------
  function multiply(a, b) {
    const o = new Float32Array(16);
    for (let c = 0; c < 4; c++)
      for (let r = 0; r < 4; r++) {
        let s = 0;
        for (let k = 0; k < 4; k++) s += a[k * 4 + r] * b[c * 4 + k];
        o[c * 4 + r] = s;
      }
    return o;
  }
  function pose(q, t) {
    // rotation quaternion (x, y, z, w) then translation
    const [x, y, z, w] = q;
    return new Float32Array([
      1 - 2 * (y * y + z * z), 2 * (x * y + z * w), 2 * (x * z - y * w), 0,
      2 * (x * y - z * w), 1 - 2 * (x * x + z * z), 2 * (y * z + x * w), 0,
      2 * (x * z + y * w), 2 * (y * z - x * w), 1 - 2 * (x * x + y * y), 0,
      t[0], t[1], t[2], 1,
    ]);
  }
  function perspective(fovy, aspect, near, far) {
    const f = 1 / Math.tan(fovy / 2);
    const o = new Float32Array(16);
    o[0] = f / aspect;
    o[5] = f;
    o[10] = (far + near) / (near - far);
    o[11] = -1;
    o[14] = (2 * far * near) / (near - far);
    return o;
  }
  function lookAt(eye, target, up) {
    const sub = (a, b) => [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
    const cross = (a, b) => [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]];
    const unit = (a) => {
      const n = Math.hypot(a[0], a[1], a[2]) || 1;
      return [a[0] / n, a[1] / n, a[2] / n];
    };
    const z = unit(sub(eye, target));
    const x = unit(cross(up, z));
    const y = cross(z, x);
    const dot = (a, b) => a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
    return new Float32Array([x[0], y[0], z[0], 0, x[1], y[1], z[1], 0, x[2], y[2], z[2], 0, -dot(x, eye), -dot(y, eye), -dot(z, eye), 1]);
  }
  function transformPoint(m, p) {
    const x = m[0] * p[0] + m[4] * p[1] + m[8] * p[2] + m[12];
    const y = m[1] * p[0] + m[5] * p[1] + m[9] * p[2] + m[13];
    const z = m[2] * p[0] + m[6] * p[1] + m[10] * p[2] + m[14];
    const w = m[3] * p[0] + m[7] * p[1] + m[11] * p[2] + m[15];
    return [x / w, y / w, z / w, w];
  }

  // ---- drawing: WebGL, or a canvas-2D fallback ------------------------------------------------
  // A back end takes meshes once (mesh: positions, normals, indices or null for lines) and then,
  // per frame, begin(viewProjection, eyeDirection), draw(mesh, model, colour, lit), end().
  const LIGHT = [0.4, 1.0, 0.3].map((x) => x / Math.hypot(0.4, 1.0, 0.3));
  function shade(colour, n, eye, lit) {
    // the one lighting rule of both back ends: ambient, a key light from above, a camera light
    const light = 0.35 + 0.5 * Math.max(n[0] * LIGHT[0] + n[1] * LIGHT[1] + n[2] * LIGHT[2], 0) +
      0.25 * Math.abs(n[0] * eye[0] + n[1] * eye[1] + n[2] * eye[2]);
    return colour.map((c) => c * (1 - lit) + c * light * lit);
  }

  function webglBackend() {
    let gl = canvas.getContext("webgl2", { antialias: true, preserveDrawingBuffer: true });
    if (!gl) {
      gl = canvas.getContext("webgl", { antialias: true, preserveDrawingBuffer: true });
      if (gl && !gl.getExtension("OES_element_index_uint")) gl = null;
    }
    if (!gl) return null;
    const vertexSource = `
      attribute vec3 position; attribute vec3 normal;
      uniform mat4 model; uniform mat4 viewProjection;
      varying vec3 worldNormal;
      void main() {
        worldNormal = mat3(model) * normal;
        gl_Position = viewProjection * model * vec4(position, 1.0);
      }`;
    const fragmentSource = `
      precision mediump float;
      uniform vec3 colour; uniform vec3 eyeDirection; uniform float lit; uniform vec3 key;
      varying vec3 worldNormal;
      void main() {
        vec3 n = normalize(worldNormal);
        float light = 0.35 + 0.5 * max(dot(n, key), 0.0) + 0.25 * abs(dot(n, eyeDirection));
        gl_FragColor = vec4(mix(colour, colour * light, lit), 1.0);
      }`;
    function compile(type, source) {
      const shader = gl.createShader(type);
      gl.shaderSource(shader, source);
      gl.compileShader(shader);
      if (!gl.getShaderParameter(shader, gl.COMPILE_STATUS)) throw new Error(gl.getShaderInfoLog(shader));
      return shader;
    }
    const program = gl.createProgram();
    gl.attachShader(program, compile(gl.VERTEX_SHADER, vertexSource));
    gl.attachShader(program, compile(gl.FRAGMENT_SHADER, fragmentSource));
    gl.linkProgram(program);
    if (!gl.getProgramParameter(program, gl.LINK_STATUS)) throw new Error(gl.getProgramInfoLog(program));
    const at = {};
    for (const name of ["position", "normal"]) at[name] = gl.getAttribLocation(program, name);
    for (const name of ["model", "viewProjection", "colour", "eyeDirection", "lit", "key"]) {
      at[name] = gl.getUniformLocation(program, name);
    }
    function upload(target, data) {
      const buffer = gl.createBuffer();
      gl.bindBuffer(target, buffer);
      gl.bufferData(target, data, gl.STATIC_DRAW);
      return buffer;
    }
    return {
      name: "WebGL",
      mesh(position, normal, index) {
        return {
          position: upload(gl.ARRAY_BUFFER, position),
          normal: upload(gl.ARRAY_BUFFER, normal),
          index: index ? upload(gl.ELEMENT_ARRAY_BUFFER, index) : null,
          count: index ? index.length : position.length / 3,
        };
      },
      begin(viewProjection, eyeDirection) {
        gl.viewport(0, 0, canvas.width, canvas.height);
        gl.clearColor(0.96, 0.96, 0.95, 1);
        gl.clear(gl.COLOR_BUFFER_BIT | gl.DEPTH_BUFFER_BIT);
        gl.enable(gl.DEPTH_TEST);
        gl.useProgram(program);
        gl.enableVertexAttribArray(at.position);
        gl.enableVertexAttribArray(at.normal);
        gl.uniformMatrix4fv(at.viewProjection, false, viewProjection);
        gl.uniform3fv(at.eyeDirection, eyeDirection);
        gl.uniform3fv(at.key, LIGHT);
      },
      draw(mesh, model, colour, lit) {
        gl.uniformMatrix4fv(at.model, false, model);
        gl.uniform3fv(at.colour, colour);
        gl.uniform1f(at.lit, lit);
        gl.bindBuffer(gl.ARRAY_BUFFER, mesh.position);
        gl.vertexAttribPointer(at.position, 3, gl.FLOAT, false, 0, 0);
        gl.bindBuffer(gl.ARRAY_BUFFER, mesh.normal);
        gl.vertexAttribPointer(at.normal, 3, gl.FLOAT, false, 0, 0);
        if (mesh.index) {
          gl.bindBuffer(gl.ELEMENT_ARRAY_BUFFER, mesh.index);
          gl.drawElements(gl.TRIANGLES, mesh.count, gl.UNSIGNED_INT, 0);
        } else {
          gl.drawArrays(gl.LINES, 0, mesh.count);
        }
      },
      end() {},
    };
  }

  // Without WebGL (a browser with it switched off): flat-shaded triangles painted far to near.
  function canvasBackend() {
    const context = canvas.getContext("2d");
    if (!context) return null;
    let viewProjection = null;
    let eyeDirection = null;
    let items = [];
    const rgb = (c) => `rgb(${c.map((x) => Math.round(255 * Math.min(1, Math.max(0, x)))).join(",")})`;
    return {
      name: "canvas 2D",
      mesh(position, normal, index) {
        return { position, normal, index };
      },
      begin(vp, eye) {
        viewProjection = vp;
        eyeDirection = eye;
        items = [];
        context.fillStyle = "rgb(245,245,242)";
        context.fillRect(0, 0, canvas.width, canvas.height);
      },
      draw(mesh, model, colour, lit) {
        const m = multiply(viewProjection, model);
        const p = mesh.position;
        const count = p.length / 3;
        const screen = new Float32Array(count * 3);
        const visible = new Uint8Array(count);
        for (let i = 0; i < count; i++) {
          const q = transformPoint(m, [p[3 * i], p[3 * i + 1], p[3 * i + 2]]);
          visible[i] = q[3] > 0 ? 1 : 0;
          screen[3 * i] = ((q[0] + 1) / 2) * canvas.width;
          screen[3 * i + 1] = ((1 - q[1]) / 2) * canvas.height;
          screen[3 * i + 2] = q[2];
        }
        if (!mesh.index) {
          for (let i = 0; i + 1 < count; i += 2) {
            if (!visible[i] || !visible[i + 1]) continue;
            const xy = [screen[3 * i], screen[3 * i + 1], screen[3 * i + 3], screen[3 * i + 4]];
            items.push({ depth: 2, line: xy, colour: rgb(colour) });
          }
          return;
        }
        const n = mesh.normal;
        const ix = mesh.index;
        for (let t = 0; t < ix.length; t += 3) {
          const [a, b, c] = [ix[t], ix[t + 1], ix[t + 2]];
          if (!visible[a] || !visible[b] || !visible[c]) continue;
          const ax = screen[3 * a], ay = screen[3 * a + 1];
          const bx = screen[3 * b], by = screen[3 * b + 1];
          const cx = screen[3 * c], cy = screen[3 * c + 1];
          if ((bx - ax) * (cy - ay) - (by - ay) * (cx - ax) >= 0) continue; // facing away (y down)
          const local = [0, 1, 2].map((k) => n[3 * a + k] + n[3 * b + k] + n[3 * c + k]);
          const world = [0, 1, 2].map((k) => model[k] * local[0] + model[4 + k] * local[1] + model[8 + k] * local[2]);
          const norm = Math.hypot(...world) || 1;
          const shaded = shade(colour, world.map((x) => x / norm), eyeDirection, lit);
          const depth = (screen[3 * a + 2] + screen[3 * b + 2] + screen[3 * c + 2]) / 3;
          items.push({ depth, triangle: [ax, ay, bx, by, cx, cy], colour: rgb(shaded) });
        }
      },
      end() {
        items.sort((u, v) => v.depth - u.depth);
        context.lineWidth = 0.6;
        for (const item of items) {
          context.strokeStyle = item.colour;
          context.beginPath();
          if (item.line) {
            context.moveTo(item.line[0], item.line[1]);
            context.lineTo(item.line[2], item.line[3]);
          } else {
            const v = item.triangle;
            context.fillStyle = item.colour;
            context.moveTo(v[0], v[1]);
            context.lineTo(v[2], v[3]);
            context.lineTo(v[4], v[5]);
            context.closePath();
            context.fill();
          }
          context.stroke();
        }
      },
    };
  }

  let backend = null;
  try {
    backend = new URLSearchParams(window.location.search).has("canvas2d") ? null : webglBackend();
  } catch (error) {
    console.warn("mbsim viewer: WebGL failed (" + error + "); drawing with the 2D canvas instead");
  }
  if (!backend) {
    backend = canvasBackend();
    if (!backend) {
      fail("this browser can draw neither WebGL nor a 2D canvas; open the .glb in a glTF viewer instead");
      return;
    }
    console.warn("mbsim viewer: no WebGL here; drawing flat-shaded triangles with the 2D canvas (slower)");
  }

  // ---- scene state ---------------------------------------------------------------------------
  const meshes = [];
  const runs = [];
  let grid = null;
  const root = pose(header.root, [0, 0, 0]);
  let t0 = Infinity;
  let t1 = -Infinity;
  let time = 0;
  let playing = true;
  let lastFrame = null;
  const camera = { yaw: 0.6, pitch: 0.35, distance: 1, target: [0, 0, 0] };
  const labels = []; // compare: one label per copy, over its place on the screen

  function buildGrid() {
    // a faint square grid for scale: under the motion in 3D (normal to up, glTF's +Y), behind
    // it in 2D (the plane z = const, as the mechanism is seen face-on)
    const lo = header.box.lo;
    const hi = header.box.hi;
    const corners = [];
    for (const x of [lo[0], hi[0]]) for (const y of [lo[1], hi[1]]) for (const z of [lo[2], hi[2]]) corners.push(transformPoint(root, [x, y, z]));
    const min = [0, 1, 2].map((i) => Math.min(...corners.map((c) => c[i])));
    const max = [0, 1, 2].map((i) => Math.max(...corners.map((c) => c[i])));
    // the grid's two in-plane axes and its normal axis, in glTF coordinates
    const [u, v, n] = header.dimension === 2 ? [0, 1, 2] : [0, 2, 1];
    const size = Math.max(max[u] - min[u], max[v] - min[v]) * 1.3 + 1e-9;
    const step = Math.pow(10, Math.floor(Math.log10(size / 4)));
    const cu = Math.round((0.5 * (min[u] + max[u])) / step) * step;
    const cv = Math.round((0.5 * (min[v] + max[v])) / step) * step;
    const half = Math.ceil(size / 2 / step) * step;
    const level = min[n] - 1e-3 * size;
    const lines = [];
    const point = (a, b) => {
      const p = [0, 0, 0];
      p[u] = a;
      p[v] = b;
      p[n] = level;
      lines.push(...p);
    };
    for (let s = -half; s <= half + 1e-9 * half; s += step) {
      point(cu - half, cv + s);
      point(cu + half, cv + s);
      point(cu + s, cv - half);
      point(cu + s, cv + half);
    }
    const vertices = new Float32Array(lines);
    const normals = new Float32Array(vertices.length);
    for (let i = n; i < normals.length; i += 3) normals[i] = 1;
    return backend.mesh(vertices, normals, null);
  }

  function decode(bytes) {
    const read = reader(bytes);
    for (const m of header.meshes) {
      const position = read.float32(3 * m.vertices);
      const normal = read.float32(3 * m.vertices);
      const index = read.uint32(m.indices);
      meshes.push(backend.mesh(position, normal, index));
    }
    for (const r of header.runs) {
      const keys = r.keys;
      const bodies = r.bodies.length;
      const times = read.float64(keys);
      const moves = undifference(read.zigzag(bodies * 3 * keys), bodies, 3, keys, r.quantum, r.origin);
      const turns = undifference(read.zigzag(bodies * 4 * keys), bodies, 4, keys, r.turn_quantum, [0, 0, 0, 0]);
      runs.push({ header: r, times, moves, turns, offset: pose([0, 0, 0, 1], r.offset) });
      t0 = Math.min(t0, times[0]);
      t1 = Math.max(t1, times[keys - 1]);
    }
    grid = buildGrid();
  }

  // pose of body b of run at the current time: linear between keys, rotation by normalised lerp
  // along the shorter arc (keys are close; slerp and nlerp differ far below a pixel)
  function bodyPose(run, b, t) {
    const times = run.times;
    const keys = times.length;
    let lo = 0;
    let hi = keys - 1;
    if (t <= times[0]) hi = 0;
    else if (t >= times[keys - 1]) lo = hi = keys - 1;
    else {
      while (hi - lo > 1) {
        const mid = (lo + hi) >> 1;
        if (times[mid] <= t) lo = mid;
        else hi = mid;
      }
    }
    const s = hi > lo ? (t - times[lo]) / (times[hi] - times[lo]) : 0;
    const m = run.moves;
    const q = run.turns;
    const a = (b * keys + lo) * 3;
    const c = (b * keys + hi) * 3;
    const translation = [0, 1, 2].map((i) => m[a + i] + s * (m[c + i] - m[a + i]));
    const qa = (b * keys + lo) * 4;
    const qc = (b * keys + hi) * 4;
    let dot = 0;
    for (let i = 0; i < 4; i++) dot += q[qa + i] * q[qc + i];
    const sign = dot < 0 ? -1 : 1;
    const rotation = [0, 1, 2, 3].map((i) => q[qa + i] + s * (sign * q[qc + i] - q[qa + i]));
    const n = Math.hypot(...rotation) || 1;
    return pose(rotation.map((x) => x / n), translation);
  }

  function resize() {
    const ratio = window.devicePixelRatio || 1;
    const width = Math.max(1, Math.round(canvas.clientWidth * ratio));
    const height = Math.max(1, Math.round(canvas.clientHeight * ratio));
    if (canvas.width !== width || canvas.height !== height) {
      canvas.width = width;
      canvas.height = height;
    }
  }

  function draw() {
    resize();
    const cp = Math.cos(camera.pitch);
    const eye = [
      camera.target[0] + camera.distance * cp * Math.sin(camera.yaw),
      camera.target[1] + camera.distance * Math.sin(camera.pitch),
      camera.target[2] + camera.distance * cp * Math.cos(camera.yaw),
    ];
    const view = lookAt(eye, camera.target, [0, 1, 0]);
    const projection = perspective(0.7, canvas.width / canvas.height, camera.distance / 500, camera.distance * 50);
    const viewProjection = multiply(projection, view);
    const d = Math.hypot(eye[0] - camera.target[0], eye[1] - camera.target[1], eye[2] - camera.target[2]);
    backend.begin(viewProjection, [0, 1, 2].map((i) => (eye[i] - camera.target[i]) / d));
    backend.draw(grid, new Float32Array([1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]), [0.78, 0.78, 0.76], 0);
    runs.forEach((run, r) => {
      const base = multiply(root, run.offset);
      for (const g of run.header.ground) backend.draw(meshes[g], base, header.ground_colour, 1);
      run.header.bodies.forEach((body, b) => {
        const model = multiply(base, bodyPose(run, b, time));
        for (const part of body.parts) backend.draw(meshes[part], model, body.colour, 1);
      });
      const label = labels[r];
      if (label) {
        const p = transformPoint(multiply(viewProjection, base), run.header.label_at);
        label.style.display = p[3] > 0 ? "block" : "none";
        label.style.left = ((p[0] + 1) / 2) * canvas.clientWidth + "px";
        label.style.top = ((1 - p[1]) / 2) * canvas.clientHeight + "px";
      }
    });
    backend.end();
  }

  // ---- controls ------------------------------------------------------------------------------
  function showTime() {
    slider.value = String(time);
    // about four significant digits of the run's duration, 3 to 6 decimals
    const decimals = Math.max(3, Math.min(6, 3 - Math.floor(Math.log10(Math.max(t1 - t0, 1e-9)))));
    clock.textContent = "t = " + time.toFixed(decimals) + " s";
    playButton.textContent = playing ? "pause" : "play";
  }
  function setTime(t) {
    time = Math.min(Math.max(t, t0), t1);
    showTime();
    draw();
  }
  function frame(now) {
    if (playing && lastFrame !== null) {
      const speed = parseFloat(speedSelect.value);
      let next = time + ((now - lastFrame) / 1000) * speed;
      if (next > t1) next = t0 + (t1 > t0 ? (next - t1) % (t1 - t0) : 0);
      time = next;
      showTime();
      draw();
    }
    lastFrame = now;
    requestAnimationFrame(frame);
  }
  playButton.addEventListener("click", () => {
    playing = !playing;
    showTime();
  });
  slider.addEventListener("input", () => {
    playing = false;
    setTime(parseFloat(slider.value));
  });
  window.addEventListener("keydown", (e) => {
    if (e.key === " " && e.target === document.body) {
      playing = !playing;
      showTime();
      e.preventDefault();
    }
  });
  let drag = null;
  canvas.addEventListener("pointerdown", (e) => {
    drag = { x: e.clientX, y: e.clientY, pan: e.button !== 0 || e.shiftKey };
    canvas.setPointerCapture(e.pointerId);
  });
  canvas.addEventListener("pointerup", () => (drag = null));
  canvas.addEventListener("pointermove", (e) => {
    if (!drag) return;
    const dx = e.clientX - drag.x;
    const dy = e.clientY - drag.y;
    drag.x = e.clientX;
    drag.y = e.clientY;
    if (drag.pan) {
      const k = camera.distance / canvas.clientHeight;
      const cy = Math.cos(camera.yaw);
      const sy = Math.sin(camera.yaw);
      camera.target[0] -= k * dx * cy;
      camera.target[2] += k * dx * sy;
      camera.target[1] += k * dy;
    } else {
      camera.yaw -= dx * 0.008;
      camera.pitch = Math.min(1.55, Math.max(-1.55, camera.pitch + dy * 0.008));
    }
    draw();
  });
  canvas.addEventListener("contextmenu", (e) => e.preventDefault());
  canvas.addEventListener(
    "wheel",
    (e) => {
      camera.distance *= Math.exp(e.deltaY * 0.001);
      draw();
      e.preventDefault();
    },
    { passive: false }
  );
  window.addEventListener("resize", draw);

  function frameCamera() {
    // the motion's box fills the view: a 3D scene from above and aside, a 2D one face-on
    const lo = header.box.lo;
    const hi = header.box.hi;
    const centre = transformPoint(root, [0, 1, 2].map((i) => 0.5 * (lo[i] + hi[i])));
    camera.target = centre.slice(0, 3);
    const aspect = Math.max(canvas.clientWidth, 1) / Math.max(canvas.clientHeight, 1);
    const tan = Math.tan(0.35);
    if (header.dimension === 2) {
      camera.yaw = 0;
      camera.pitch = 0;
      const width = hi[0] - lo[0];
      const height = hi[1] - lo[1];
      camera.distance = 1.1 * Math.max(height / 2 / tan, width / 2 / (tan * aspect)) + hi[2] || 1;
    } else {
      const radius = 0.5 * Math.hypot(hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]) || 1;
      camera.distance = (0.95 * radius) / Math.sin(0.35 * Math.min(aspect, 1));
    }
  }

  // #t=1.5 in the address: open paused at that time (a link to a moment, or a screenshot)
  function applyHash() {
    const match = /(?:^#|&)t=([-+0-9.eE]+)/.exec(window.location.hash);
    if (match) {
      playing = false;
      setTime(parseFloat(match[1]));
    }
  }

  inflate(document.getElementById("mbsim-data").textContent.trim())
    .then((bytes) => {
      decode(bytes);
      slider.min = String(t0);
      slider.max = String(t1);
      slider.step = "any";
      time = t0;
      header.runs.forEach((r) => {
        if (header.runs.length > 1) {
          const div = document.createElement("div");
          div.className = "label";
          div.textContent = r.label;
          document.getElementById("stage").appendChild(div);
          labels.push(div);
        }
      });
      frameCamera();
      showTime();
      applyHash();
      window.addEventListener("hashchange", applyHash);
      draw();
      api.setTime = setTime;
      api.play = () => {
        playing = true;
        showTime();
      };
      api.pause = () => {
        playing = false;
        showTime();
      };
      api.time = () => time;
      api.range = () => [t0, t1];
      api.ready = true;
      document.body.dataset.ready = "1";
      requestAnimationFrame(frame);
    })
    .catch((error) => fail("cannot read the motion stored in this page: " + error));
})();
