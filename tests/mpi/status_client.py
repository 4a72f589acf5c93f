#!/usr/bin/env python3
"""A client of strata's live status (--status), for the tests and the
overhead benchmark: reads the URL from a run's log, scrapes /metrics at a
steady rate and checks every scrape against the Prometheus text exposition
format, and that no counter decreases between two scrapes.

Usage:
  status_client.py url LOG [TIMEOUT]        the URL once the log names it
  status_client.py scrape URL RATE OUT.json  scrape until the run is finished
                                            (or the server is gone); OUT gets
                                            the scrape count, the phases seen and
                                            the last /metrics and /status.json
  status_client.py hostile URL PID NEVER HALF OUT.json
                                            NEVER clients that ask for /status.json
                                            and never read, and HALF that send part
                                            of a request line and hang, held while
                                            normal scrapes of /status.json are timed;
                                            OUT gets process PID's VmRSS before and
                                            while they are held, the scrape times
                                            and how many of each were still open.
                                            With a server on 127.0.0.1 they come
                                            from 127.0.0.2 and 127.0.0.3 (other
                                            hosts, as the per-address limit sees
                                            them), the scrapes from 127.0.0.1
  status_client.py burst URL N SECONDS OUT.json
                                            once a second for SECONDS seconds, N
                                            scrapes of /metrics at once; OUT gets
                                            the scrapes answered and those that
                                            failed (not within their second)
  status_client.py selftest                 the checks against broken texts
Exit status 1 on the first malformed scrape or decreasing counter.
"""
import json
import math
import re
import sys
import time
import urllib.error
import urllib.request

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE = re.compile(rf"^({NAME})(?:\{{((?:{LABEL})(?:,{LABEL})*)?\}})? (\S+)(?: (-?\d+))?$")
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def parse_value(text, where):
    if text in ("NaN", "+Inf", "-Inf"):
        return float(text.replace("Inf", "inf").replace("NaN", "nan"))
    try:
        return float(text)
    except ValueError:
        fail(f"{where}: value {text!r} is not a number")


def parse_metrics(text):
    """Every line parsed; {(name, labels): value} and {family: type}."""
    if not text.endswith("\n"):
        fail("/metrics does not end with a newline")
    types, helps, samples = {}, {}, {}
    for n, line in enumerate(text.split("\n")[:-1], 1):
        where = f"/metrics line {n} ({line!r})"
        if line.startswith("# HELP "):
            parts = line.split(" ", 3)
            if len(parts) < 4 or not re.fullmatch(NAME, parts[2]):
                fail(f"{where}: malformed HELP")
            if parts[2] in helps:
                fail(f"{where}: a second HELP for {parts[2]}")
            helps[parts[2]] = parts[3]
            continue
        if line.startswith("# TYPE "):
            parts = line.split(" ")
            if len(parts) != 4 or not re.fullmatch(NAME, parts[2]) or parts[3] not in TYPES:
                fail(f"{where}: malformed TYPE")
            if parts[2] in types:
                fail(f"{where}: a second TYPE for {parts[2]}")
            types[parts[2]] = parts[3]
            continue
        if line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            fail(f"{where}: not a sample line")
        name, labels, value = m.group(1), m.group(2) or "", m.group(3)
        fam = re.sub(r"_(bucket|sum|count)$", "", name)
        if name not in types and fam not in types:
            fail(f"{where}: sample before its TYPE line")
        key = (name, labels)
        if key in samples:
            fail(f"{where}: a second sample of the same series")
        samples[key] = parse_value(value, where)
    for fam, t in types.items():
        if t != "histogram":
            continue
        buckets = [(k[1], v) for k, v in samples.items() if k[0] == fam + "_bucket"]
        if not buckets:
            fail(f"histogram {fam} has no buckets")
        bounds = []
        for lab, v in buckets:
            le = re.search(r'le="([^"]+)"', lab).group(1)
            bounds.append((math.inf if le == "+Inf" else float(le), v))
        bounds.sort()
        if bounds[-1][0] != math.inf:
            fail(f"histogram {fam} has no +Inf bucket")
        for (b1, v1), (b2, v2) in zip(bounds, bounds[1:]):
            if v2 < v1:
                fail(f"histogram {fam}: bucket le={b2} ({v2}) below le={b1} ({v1})")
        count = samples.get((fam + "_count", ""))
        if count is None or (fam + "_sum", "") not in samples:
            fail(f"histogram {fam} lacks _sum or _count")
        if count != bounds[-1][1]:
            fail(f"histogram {fam}: _count {count} differs from the +Inf bucket {bounds[-1][1]}")
    return samples, types


def counters(samples, types):
    """The series that must never decrease: counters, histogram buckets and counts."""
    out = {}
    for (name, labels), v in samples.items():
        fam = re.sub(r"_(bucket|count)$", "", name)
        if types.get(name) == "counter" or (types.get(fam) == "histogram" and name != fam + "_sum"):
            out[(name, labels)] = v
    return out


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.headers.get("Content-Type", ""), r.read().decode("utf-8")


def cmd_url(log, limit=60.0):
    end = time.time() + limit
    while time.time() < end:
        try:
            m = re.search(r"live status at (http://\S+)", open(log).read())
            if m:
                print(m.group(1))
                return
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    fail(f"{log} names no live status URL after {limit:g} s")


def cmd_scrape(url, rate, out):
    period = 1.0 / float(rate)
    prev, n, last, phases = {}, 0, "", []
    next_t = time.time()
    while True:
        try:
            code, ctype, text = get(url + "metrics")
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            break  # the server is gone: the run ended
        if code != 200 or not ctype.startswith("text/plain"):
            fail(f"/metrics answered {code} {ctype}")
        samples, types = parse_metrics(text)
        now = counters(samples, types)
        for k, v in now.items():
            if k in prev and v < prev[k]:
                fail(f"counter {k[0]}{{{k[1]}}} fell from {prev[k]} to {v} (scrape {n + 1})")
        prev, last, n = now, text, n + 1
        phase = [k[1] for k, v in samples.items() if k[0] == "strata_phase" and v == 1]
        if phase and (not phases or phases[-1] != phase[0]):
            phases.append(phase[0])
        if phase and phase[0] in ('phase="finished"', 'phase="failed"'):
            break
        next_t += period
        time.sleep(max(0.0, next_t - time.time()))
    status = None
    try:
        status = json.loads(get(url + "status.json")[2])
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        pass
    json.dump({"scrapes": n, "phases": phases, "metrics": last, "status": status}, open(out, "w"))
    print(f"{n} scrapes, every one well-formed, no counter fell; phases seen: {' '.join(phases)}")


def vm_rss_kb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    fail(f"no VmRSS for process {pid}")


def timed_get(url, timeout=30):
    t = time.time()
    code, _, text = get(url, timeout)
    if code != 200:
        fail(f"{url} answered {code}")
    return time.time() - t, text


def still_open(sock):
    """Whether the server has not closed sock (nothing to read, no EOF)."""
    import socket
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def cmd_hostile(url, pid, never, half, out):
    import socket
    import urllib.parse
    u = urllib.parse.urlparse(url)
    doc_t, doc = timed_get(url + "status.json")
    rss0 = vm_rss_kb(pid)
    socks = {"never": [], "half": []}
    try:
        for i in range(never + half):
            kind = "never" if i < never else "half"
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            if u.hostname == "127.0.0.1":
                s.bind(("127.0.0.2" if kind == "never" else "127.0.0.3", 0))
            if kind == "never":
                # A small window: the server cannot hand the whole document to
                # the kernel, so each of these connections keeps its response.
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.settimeout(5)
            try:
                s.connect((u.hostname, u.port))
            except OSError:
                s.close()
                continue
            s.settimeout(None)
            s.sendall(b"GET /status.json HTTP/1.1\r\nHost: x\r\n\r\n" if kind == "never"
                      else b"GET /status.json HT")
            socks[kind].append(s)
        time.sleep(1.5)  # the server has read every request and sent what fits
        times = []
        for _ in range(5):
            t, text = timed_get(url + "status.json")
            json.loads(text)
            times.append(t)
            time.sleep(0.2)
        rss1 = vm_rss_kb(pid)
        held = {k: sum(still_open(s) for s in v) for k, v in socks.items()}
    finally:
        for v in socks.values():
            for s in v:
                s.close()
    r = {"rss0_kb": rss0, "rss1_kb": rss1, "growth_mb": (rss1 - rss0) / 1024.0,
         "scrape_s": times, "doc_bytes": len(doc), "held": held}
    json.dump(r, open(out, "w"))
    print(f"{never} clients that never read, {half} half-open (still open: {held['never']}, "
          f"{held['half']}); /status.json of {len(doc)} bytes; rank 0 VmRSS {rss0} kB before, "
          f"{rss1} kB while held (+{r['growth_mb']:.1f} MB); scrapes meanwhile took "
          + " ".join(f"{t:.3f}" for t in times) + " s")


def cmd_burst(url, n, seconds, out):
    """Once a second for `seconds` seconds, n scrapes of /metrics at once."""
    import asyncio
    import urllib.parse
    u = urllib.parse.urlparse(url)
    req = f"GET /metrics HTTP/1.1\r\nHost: {u.hostname}\r\nConnection: close\r\n\r\n".encode()
    done = {"ok": 0, "failed": 0}

    async def scrape():
        r, w = await asyncio.open_connection(u.hostname, u.port)
        try:
            w.write(req)
            return await r.read()
        finally:
            w.close()

    async def one(until):
        try:
            # Not answered within its second: failed.
            data = await asyncio.wait_for(scrape(), max(0.01, until - time.time()))
            done["ok" if data.startswith(b"HTTP/1.1 200") else "failed"] += 1
        except (OSError, asyncio.TimeoutError):
            done["failed"] += 1

    async def main():
        t0 = time.time()
        for k in range(int(seconds)):
            start = t0 + k
            await asyncio.sleep(max(0.0, start - time.time()))
            await asyncio.gather(*(one(start + 1.0) for _ in range(n)))

    t0 = time.time()
    asyncio.run(main())
    t1 = time.time()
    r = {"seconds": t1 - t0, "scrapes": done["ok"], "failed": done["failed"]}
    json.dump(r, open(out, "w"))
    print(f"{int(seconds)} rounds of {n} scrapes of /metrics at once: {done['ok']} answered, "
          f"{done['failed']} refused, reset or not answered within the round's second")


def cmd_selftest():
    """Every check must catch its own fault (run in a child: fail() exits)."""
    import subprocess
    good = ("# HELP a_total x\n# TYPE a_total counter\na_total 1\n"
            "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"0\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum -1\nh_count 2\n")
    bad = {
        "no newline at the end": good[:-1],
        "a sample before its TYPE": "x 1\n",
        "a value that is no number": good.replace("a_total 1", "a_total one"),
        "a malformed label": good.replace("a_total 1", "a_total{w=1} 1"),
        "a series twice": good + "a_total 2\n",
        "buckets that fall": good.replace('le="+Inf"} 2', 'le="+Inf"} 0').replace("h_count 2", "h_count 0"),
        "a count unlike +Inf": good.replace("h_count 2", "h_count 3"),
        "an unknown type": good.replace("counter", "countr"),
    }
    code = "import sys; sys.path.insert(0, sys.argv[1]); import status_client as c; c.parse_metrics(sys.argv[2])"
    here = __import__("os").path.dirname(__file__)
    for what, text in [("well-formed", good)] + list(bad.items()):
        r = subprocess.run([sys.executable, "-c", code, here, text], capture_output=True, text=True)
        if (r.returncode == 0) != (what == "well-formed"):
            fail(f"the check of {what}: exit status {r.returncode} {r.stdout.strip()}")
        print(f"ok: {what}: {'accepted' if r.returncode == 0 else r.stdout.strip()}")
    s1, t1 = parse_metrics(good)
    s2, t2 = parse_metrics(good.replace("a_total 1", "a_total 0.5"))
    c1, c2 = counters(s1, t1), counters(s2, t2)
    if not any(c2[k] < c1[k] for k in c1):
        fail("a falling counter is not seen")
    print("ok: a falling counter is seen")


if __name__ == "__main__":
    if sys.argv[1:] == ["selftest"]:
        cmd_selftest()
        sys.exit(0)
    if len(sys.argv) >= 3 and sys.argv[1] == "url":
        cmd_url(sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else 60.0)
    elif len(sys.argv) == 5 and sys.argv[1] == "scrape":
        cmd_scrape(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) == 7 and sys.argv[1] == "hostile":
        cmd_hostile(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
    elif len(sys.argv) == 6 and sys.argv[1] == "burst":
        cmd_burst(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5])
    else:
        sys.exit(__doc__)
