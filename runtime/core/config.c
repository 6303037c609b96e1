/* Every DDP_* environment variable is read and validated here, and only here, so a typo or a
 * bad value is one clear init error instead of a surprise deep inside a collective. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ddp_internal.h"

extern char **environ;

/* The variables this module knows; anything else named DDP_* is reported as unknown. */
static const char *const ddp__known_vars[] = {
    "DDP_DEBUG",          "DDP_DEBUG_FILE",   "DDP_TIMELINE",     "DDP_RANKS_PER_NODE",
    "DDP_DEVICE",         "DDP_CUDA_AWARE",   "DDP_ALLREDUCE_ALGO", "DDP_DEVICE_EMULATE",
    "DDP_STAGING_CHUNK",  "DDP_STAGING_DEPTH", "DDP_TRANSPORT",   "DDP_TIMEOUT_S",
    "DDP_ON_TIMEOUT",     "DDP_CHECK",        "DDP_REQUIRE_GPU",  "DDP_WORLD_SIZE",
    "DDP_SHM",            "DDP_HIER_PIPELINE", NULL};

void ddp__config_defaults(ddp__config_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->debug = DDP_LOG_WARN;
  cfg->ranks_per_node = 0;
  cfg->device = -1;
  cfg->cuda_aware = -1;
  cfg->allreduce_algo = DDP_ALGO_AUTO;
  cfg->staging_chunk = (size_t)4 << 20;
  cfg->staging_depth = 3;
  cfg->transport = DDP_TRANSPORT_AUTO;
  cfg->timeout_s = 600.0;
  cfg->on_timeout_return = 0;
  cfg->check = 0;
  cfg->shm = 1;
  cfg->hier_pipeline = (size_t)16 << 20;
}

static ddp_status_t bad(const char *name, const char *value, const char *allowed) {
  return ddp__error(DDP_ECONFIG, "%s='%s' is invalid (allowed: %s)", name, value, allowed);
}

/* Whole-string integer parse with range check. */
static int parse_long(const char *s, long lo, long hi, long *out) {
  if (*s == '\0') return 0;
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return 0;
  *out = v;
  return 1;
}

static int parse_bool(const char *s, int *out) {
  if (!strcmp(s, "1") || !strcasecmp(s, "yes") || !strcasecmp(s, "true") || !strcasecmp(s, "on"))
    return (*out = 1), 1;
  if (!strcmp(s, "0") || !strcasecmp(s, "no") || !strcasecmp(s, "false") || !strcasecmp(s, "off"))
    return (*out = 0), 1;
  return 0;
}

ddp_status_t ddp__parse_size(const char *text, size_t *out) {
  DDP_CHECK_ARG(text != NULL && out != NULL, "text or out is NULL");
  const char *s = text;
  if (!isdigit((unsigned char)*s)) return ddp__error(DDP_EINVAL, "size '%s' is not a number", text);
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0) return ddp__error(DDP_EINVAL, "size '%s' is out of range", text);
  unsigned shift = 0;
  if (*end) {
    switch (toupper((unsigned char)*end)) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      default: return ddp__error(DDP_EINVAL, "size '%s' has an unknown suffix (K, M, G)", text);
    }
    end++;
    if (toupper((unsigned char)*end) == 'B') end++;
    if (*end) return ddp__error(DDP_EINVAL, "size '%s' has trailing characters", text);
  }
  if (shift && v > (~0ULL >> shift)) return ddp__error(DDP_EINVAL, "size '%s' overflows", text);
  *out = (size_t)(v << shift);
  return DDP_OK;
}

static ddp_status_t copy_str(char *dst, size_t cap, const char *name, const char *value) {
  size_t len = strlen(value);
  if (len == 0 || len >= cap) return bad(name, value, "a non-empty path shorter than 256 bytes");
  memcpy(dst, value, len + 1);
  return DDP_OK;
}

ddp_status_t ddp__config_load(ddp__config_t *cfg, ddp__getenv_fn get, void *ctx) {
  DDP_CHECK_ARG(cfg != NULL && get != NULL, "cfg or get is NULL");
  ddp__config_t c;
  ddp__config_defaults(&c);
  const char *v;
  long l;
  if ((v = get("DDP_DEBUG", ctx)) != NULL) {
    if (!strcasecmp(v, "NONE")) c.debug = DDP_LOG_NONE;
    else if (!strcasecmp(v, "WARN")) c.debug = DDP_LOG_WARN;
    else if (!strcasecmp(v, "INFO")) c.debug = DDP_LOG_INFO;
    else if (!strcasecmp(v, "TRACE")) c.debug = DDP_LOG_TRACE;
    else return bad("DDP_DEBUG", v, "NONE, WARN, INFO, TRACE");
  }
  if ((v = get("DDP_DEBUG_FILE", ctx)) != NULL)
    DDP_TRY(copy_str(c.debug_file, sizeof c.debug_file, "DDP_DEBUG_FILE", v));
  if ((v = get("DDP_TIMELINE", ctx)) != NULL)
    DDP_TRY(copy_str(c.timeline, sizeof c.timeline, "DDP_TIMELINE", v));
  if ((v = get("DDP_RANKS_PER_NODE", ctx)) != NULL) {
    if (!parse_long(v, 1, 1 << 20, &l)) return bad("DDP_RANKS_PER_NODE", v, "an integer >= 1");
    c.ranks_per_node = (int)l;
  }
  if ((v = get("DDP_DEVICE", ctx)) != NULL) {
    if (!strcasecmp(v, "none") || !strcasecmp(v, "host")) c.device = -2;
    else if (!parse_long(v, 0, 1023, &l)) return bad("DDP_DEVICE", v, "a device index 0..1023 or 'none'");
    else c.device = (int)l;
  }
  if ((v = get("DDP_CUDA_AWARE", ctx)) != NULL) {
    if (!parse_bool(v, &c.cuda_aware)) return bad("DDP_CUDA_AWARE", v, "0 or 1");
  }
  if ((v = get("DDP_ALLREDUCE_ALGO", ctx)) != NULL) {
    if (ddp_algo_parse(v, &c.allreduce_algo) != DDP_OK)
      return bad("DDP_ALLREDUCE_ALGO", v, "auto, mpi, ring, rhd, shm, hier");
  }
  if ((v = get("DDP_DEVICE_EMULATE", ctx)) != NULL) {
    if (!parse_bool(v, &c.device_emulate)) return bad("DDP_DEVICE_EMULATE", v, "0 or 1");
  }
  if ((v = get("DDP_REQUIRE_GPU", ctx)) != NULL) {
    if (!parse_bool(v, &c.require_gpu)) return bad("DDP_REQUIRE_GPU", v, "0 or 1");
  }
  if ((v = get("DDP_STAGING_CHUNK", ctx)) != NULL) {
    size_t sz = 0;
    if (ddp__parse_size(v, &sz) != DDP_OK || sz < 4096 || sz > ((size_t)1 << 30))
      return bad("DDP_STAGING_CHUNK", v, "a size from 4K to 1G, e.g. 4M");
    c.staging_chunk = sz;
  }
  if ((v = get("DDP_STAGING_DEPTH", ctx)) != NULL) {
    if (!parse_long(v, 2, 4, &l)) return bad("DDP_STAGING_DEPTH", v, "2, 3 or 4");
    c.staging_depth = (int)l;
  }
  if ((v = get("DDP_TRANSPORT", ctx)) != NULL) {
    if (ddp_transport_parse(v, &c.transport) != DDP_OK)
      return bad("DDP_TRANSPORT", v, "auto, mpi, staged, nccl");
  }
  if ((v = get("DDP_TIMEOUT_S", ctx)) != NULL) {
    char *end = NULL;
    errno = 0;
    double d = strtod(v, &end);
    if (errno != 0 || end == v || *end != '\0' || !isfinite(d) || d <= 0 || d > 1e7)
      return bad("DDP_TIMEOUT_S", v, "seconds > 0, e.g. 600 or 2.5");
    c.timeout_s = d;
  }
  if ((v = get("DDP_ON_TIMEOUT", ctx)) != NULL) {
    if (!strcmp(v, "abort")) c.on_timeout_return = 0;
    else if (!strcmp(v, "return")) c.on_timeout_return = 1;
    else return bad("DDP_ON_TIMEOUT", v, "abort or return");
  }
  if ((v = get("DDP_CHECK", ctx)) != NULL) {
    if (!parse_bool(v, &c.check)) return bad("DDP_CHECK", v, "0 or 1");
  }
  if ((v = get("DDP_SHM", ctx)) != NULL) {
    if (!parse_bool(v, &c.shm)) return bad("DDP_SHM", v, "0 or 1");
  }
  if ((v = get("DDP_HIER_PIPELINE", ctx)) != NULL) {
    size_t sz = 0;
    if (ddp__parse_size(v, &sz) != DDP_OK || sz > ((size_t)1 << 30))
      return bad("DDP_HIER_PIPELINE", v, "0 (off) or a chunk size up to 1G, e.g. 16M");
    c.hier_pipeline = sz;
  }
  if ((v = get("DDP_WORLD_SIZE", ctx)) != NULL) {
    if (!parse_long(v, 1, INT_MAX, &l)) return bad("DDP_WORLD_SIZE", v, "a rank count >= 1");
    c.world_size = (int)l;
  }
  *cfg = c;
  return DDP_OK;
}

/* getenv adapter for ddp__config_load over a "NAME=VALUE\n" text block. */
typedef struct {
  const char *text;
  size_t len;
  char value[512];
} text_env_t;

static const char *text_get(const char *name, void *ctx) {
  text_env_t *t = ctx;
  size_t nlen = strlen(name);
  const char *p = t->text, *endp = t->text + t->len;
  const char *found = NULL;
  size_t found_len = 0;
  while (p < endp) {
    const char *eol = memchr(p, '\n', (size_t)(endp - p));
    if (!eol) eol = endp;
    if ((size_t)(eol - p) > nlen && memcmp(p, name, nlen) == 0 && p[nlen] == '=') {
      found = p + nlen + 1; /* the last definition wins, as with a shell */
      found_len = (size_t)(eol - found);
    }
    p = eol + 1;
  }
  if (!found) return NULL;
  if (found_len >= sizeof t->value) found_len = sizeof t->value - 1;
  memcpy(t->value, found, found_len);
  t->value[found_len] = '\0';
  if (memchr(t->value, '\0', found_len)) return t->value; /* embedded NUL: truncated value */
  return t->value;
}

ddp_status_t ddp__config_parse_text(ddp__config_t *cfg, const char *text, size_t len) {
  DDP_CHECK_ARG(cfg != NULL, "cfg is NULL");
  DDP_CHECK_ARG(text != NULL || len == 0, "text is NULL with len %zu", len);
  text_env_t t = {text ? text : "", len, {0}};
  return ddp__config_load(cfg, text_get, &t);
}

void ddp__config_format(const ddp__config_t *c, char *buf, size_t bytes) {
  static const char *levels[] = {"NONE", "WARN", "INFO", "TRACE"};
  snprintf(buf, bytes,
           "DDP_DEBUG=%s DDP_DEBUG_FILE=%s DDP_TIMELINE=%s DDP_RANKS_PER_NODE=%d DDP_DEVICE=%d "
           "DDP_CUDA_AWARE=%d DDP_ALLREDUCE_ALGO=%s DDP_DEVICE_EMULATE=%d DDP_STAGING_CHUNK=%zu "
           "DDP_STAGING_DEPTH=%d DDP_TRANSPORT=%s DDP_TIMEOUT_S=%g DDP_ON_TIMEOUT=%s DDP_CHECK=%d "
           "DDP_REQUIRE_GPU=%d DDP_WORLD_SIZE=%d DDP_SHM=%d DDP_HIER_PIPELINE=%zu",
           levels[c->debug], c->debug_file[0] ? c->debug_file : "(stderr)",
           c->timeline[0] ? c->timeline : "(off)", c->ranks_per_node, c->device, c->cuda_aware,
           ddp_algo_name(c->allreduce_algo), c->device_emulate, c->staging_chunk, c->staging_depth,
           ddp_transport_name(c->transport), c->timeout_s, c->on_timeout_return ? "return" : "abort",
           c->check, c->require_gpu, c->world_size, c->shm, c->hier_pipeline);
}

void ddp__config_unknown(char *buf, size_t bytes) {
  size_t used = 0;
  if (bytes) buf[0] = '\0';
  for (char **e = environ; e && *e; e++) {
    if (strncmp(*e, "DDP_", 4) != 0) continue;
    const char *eq = strchr(*e, '=');
    size_t nlen = eq ? (size_t)(eq - *e) : strlen(*e);
    int known = 0;
    for (int i = 0; ddp__known_vars[i]; i++)
      if (strlen(ddp__known_vars[i]) == nlen && !strncmp(ddp__known_vars[i], *e, nlen)) known = 1;
    if (known) continue;
    int n = snprintf(buf + used, bytes > used ? bytes - used : 0, "%s%.*s", used ? "," : "",
                     (int)nlen, *e);
    if (n > 0) used += (size_t)n;
    if (used >= bytes) break;
  }
}
