-- wrk script for bench/_load.py: POST one JSON body over and over, check every answer.
--
-- The body comes from the file named by CHARTER_WRK_BODY. Two placeholders in it are filled
-- per request, so that no two requests of a run share them: __ID__ (a JSON-RPC id, a
-- number) and __UUID__ (a request id for the ledger). CHARTER_WRK_RUN is a random 8-digit
-- hex string per run, so ids of a later run against the same server are new too.
-- CHARTER_WRK_EXPECT is a string every good answer contains; an answer without it, or a
-- status other than 200, counts as bad. CHARTER_WRK_LIMIT, when set, stops each thread
-- after that many answers (a fixed number of calls rather than a duration) and creates the
-- file CHARTER_WRK_DONE names: wrk's main thread still waits out its duration, so the
-- bench interrupts it (SIGINT, after which wrk reports as usual) once the file exists.
-- Headers come from wrk's -H options. done() prints one JSON line for the bench to read.

local body_file = assert(os.getenv("CHARTER_WRK_BODY"), "CHARTER_WRK_BODY is not set")
local handle = assert(io.open(body_file, "rb"))
local template = handle:read("*a")
handle:close()
local run = os.getenv("CHARTER_WRK_RUN") or "00000000"
local expect = os.getenv("CHARTER_WRK_EXPECT") or ""
local limit = tonumber(os.getenv("CHARTER_WRK_LIMIT") or "0")
local done_file = os.getenv("CHARTER_WRK_DONE")
local per_request = template:find("__ID__", 1, true) or template:find("__UUID__", 1, true)

local threads = {}
local next_thread = 0

function setup(thread)
  thread:set("tid", next_thread)
  next_thread = next_thread + 1
  table.insert(threads, thread)
end

wrk.method = "POST"
wrk.body = template

local sent = 0
local answered = 0
bad = 0

function request()
  if not per_request then
    return wrk.request()
  end
  sent = sent + 1
  local body = template:gsub("__ID__", tostring(tid * 1000000000 + sent))
  body = body:gsub("__UUID__", string.format("%s-%04x-4000-8000-%012x", run, tid, sent))
  return wrk.format(nil, nil, nil, body)
end

function response(status, headers, body)
  answered = answered + 1
  if status ~= 200 or (expect ~= "" and not body:find(expect, 1, true)) then
    bad = bad + 1
  end
  if limit > 0 and answered == limit then
    if done_file then
      local marker = io.open(done_file, "w")
      if marker then
        marker:close()
      end
    end
    wrk.thread:stop()
  end
end

function done(summary, latency, requests)
  local bad_total = 0
  for _, thread in ipairs(threads) do
    bad_total = bad_total + (thread:get("bad") or 0)
  end
  local errors = summary.errors
  io.write(string.format(
    '{"requests": %d, "duration_us": %d, "p50_us": %d, "p99_us": %d, "bad": %d, '
      .. '"socket_errors": %d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    bad_total, errors.connect + errors.read + errors.write + errors.timeout
  ))
end
