-- wrk script for bench/http_load.sh: each request is GET /v1/chunks/<id> of a random chunk, or
-- with BDN_BATCH=N a POST /v1/chunks/batch of N random chunk ids. Ids come from the file
-- $BDN_IDS (one 64-hex id per line); BDN_TOKEN is sent as the bearer token, BDN_VERSION (if set)
-- as Bdn-Version. At the end it prints
-- one line: RESULT requests=… bytes=… duration_us=… errors=… p50_us=… p99_us=…
-- With BDN_RATE=R and BDN_CONNS=C (the -c given to wrk), each connection waits about C/R
-- seconds (jittered ±50 %) after each answer, so the C connections together offer about R
-- requests per second whatever C is: the latency then measures what holding C connections costs,
-- not the queue a closed loop of C clients builds in front of a saturated server.
local ids = {}
for line in io.lines(os.getenv("BDN_IDS")) do
  ids[#ids + 1] = line
end
local batch = tonumber(os.getenv("BDN_BATCH") or "0")
local headers = {["Authorization"] = "Bearer " .. os.getenv("BDN_TOKEN")}
-- With BDN_VERSION (bdn:<ns>/<vol>@b3:<hex>), every request names the version it reads.
local version = os.getenv("BDN_VERSION")
if version and version ~= "" then headers["Bdn-Version"] = version end
local rate = tonumber(os.getenv("BDN_RATE") or "0")
local conns = tonumber(os.getenv("BDN_CONNS") or "1")
-- wrk delays each connection's first request too (before it is written), and calls delay() of a
-- thread's Lua state once per connection at the start: the first BDN_CONNS / BDN_WRK_THREADS
-- calls spread the first requests evenly over one interval, so the run starts at the offered
-- rate instead of a burst of C requests (or, at long intervals, nothing for a whole interval).
local first_delays = math.floor(conns / tonumber(os.getenv("BDN_WRK_THREADS") or "1"))
if rate > 0 then
  function delay()
    local interval = conns * 1000 / rate
    if first_delays > 0 then
      first_delays = first_delays - 1
      return interval * math.random()
    end
    return interval * (0.5 + math.random())
  end
end

function init(args)
  math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16))
end

function request()
  if batch == 0 then
    return wrk.format("GET", "/v1/chunks/" .. ids[math.random(#ids)], headers)
  end
  local parts = {}
  for i = 1, batch do
    parts[i] = '"' .. ids[math.random(#ids)] .. '"'
  end
  local h = {["Authorization"] = headers["Authorization"], ["Content-Type"] = "application/json",
             ["Bdn-Version"] = headers["Bdn-Version"]}
  return wrk.format("POST", "/v1/chunks/batch", h, '{"ids":[' .. table.concat(parts, ",") .. "]}")
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
      "RESULT requests=%d bytes=%d duration_us=%d errors=%d p50_us=%d p99_us=%d\n",
      summary.requests, summary.bytes, summary.duration,
      e.connect + e.read + e.write + e.status + e.timeout,
      latency:percentile(50), latency:percentile(99)))
end
