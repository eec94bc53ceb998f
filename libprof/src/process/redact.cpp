#include "process/redact.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

namespace sonde {

namespace {
// A name's parts, upper-cased: split at what is not a letter or digit, and at camelCase
// (`--hf_token` HF TOKEN, `apiKey` API KEY).
std::vector<std::string> name_parts(std::string_view name) {
  std::vector<std::string> parts;
  std::string part;
  for (size_t i = 0; i <= name.size(); ++i) {
    char c = i < name.size() ? name[i] : '\0';
    bool camel = i > 0 && i < name.size() && std::isupper(static_cast<unsigned char>(c)) &&
                 std::islower(static_cast<unsigned char>(name[i - 1]));
    if (i == name.size() || std::isalnum(static_cast<unsigned char>(c)) == 0 || camel) {
      if (!part.empty()) parts.push_back(part);
      part.clear();
      if (i == name.size() || std::isalnum(static_cast<unsigned char>(c)) == 0) continue;
    }
    part += char(std::toupper(static_cast<unsigned char>(c)));
  }
  return parts;
}
}  // namespace

// SECRET, PASSWORD and CREDENTIAL anywhere in the name; TOKEN, KEY, PASS and AUTH as a part of
// it (split at what is not a letter or digit, and at camelCase), or ending one (HFTOKEN, APIKEY,
// OAUTH). As substrings they took ordinary ML options for secrets, which then read alike in
// `sonde diff` (a red-team run): --max_new_tokens, --tokenizer, --keypoints, --num-passes,
// --bypass, --authors; and a tokenizer's special tokens (--pad_token_id, --eos-token) or a
// key's shape (--key-dim, --sort-key) are no secret either.
bool name_looks_secret(std::string_view name) {
  static constexpr std::string_view kAnywhere[] = {"SECRET",     "PASSWORD",   "PASSWD",
                                                   "PASSPHRASE", "CREDENTIAL", "AUTHORIZATION"};
  std::string upper(name);
  for (char& c : upper) c = char(std::toupper(static_cast<unsigned char>(c)));
  if (std::any_of(std::begin(kAnywhere), std::end(kAnywhere),
                  [&](std::string_view w) { return upper.find(w) != std::string::npos; }))
    return true;
  std::vector<std::string> parts = name_parts(name);
  static constexpr std::string_view kNotSecretBefore[] = {
      "PAD",  "EOS",   "BOS",     "UNK",  "SEP",  "CLS",     "MASK",   "STOP", "SPECIAL",
      "SORT", "GROUP", "PRIMARY", "ROPE", "DICT", "MONITOR", "METRIC", "KV",   "QUERY"};
  static constexpr std::string_view kNotSecretAfter[] = {
      "DIM", "DIMS", "SIZE",  "LEN", "LENGTH", "BUDGET", "COUNT", "LIMIT",  "ID",
      "IDS", "TYPE", "TYPES", "NUM", "INDEX",  "POS",    "FIELD", "COLUMN", "COL"};
  auto one_of = [](std::string_view w, auto& set) {
    return std::find(std::begin(set), std::end(set), w) != std::end(set);
  };
  for (size_t k = 0; k < parts.size(); ++k) {
    std::string_view p = parts[k];
    bool named = p == "TOKEN" || p.ends_with("TOKEN") || p == "KEY" || p.ends_with("KEY") ||
                 p == "PASS" || p == "AUTH" || p.ends_with("AUTH");
    if (!named) continue;
    bool plain = p == "TOKEN" || p == "KEY";  // a word that names a model's parts too
    if (plain && ((k > 0 && one_of(parts[k - 1], kNotSecretBefore)) ||
                  (k + 1 < parts.size() && one_of(parts[k + 1], kNotSecretAfter))))
      continue;
    return true;
  }
  return false;
}

namespace {
constexpr size_t npos = std::string::npos;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Where a URL's user or host starts, past an IPv6 address's brackets (`[::1]:8080`), whose
// colons start no password.
size_t past_brackets(const std::string& word, size_t start) {
  if (start >= word.size() || word[start] != '[') return start;
  size_t close = word.find(']', start);
  return close == npos ? word.size() : close;
}

// The '@' that ends a password holding an unencoded '/', '?' or '#' (`postgres://u:pa/ss@h`,
// `redis://:pa#ss@h`), which ends the authority before its '@': a colon in the authority that
// starts no port (`host:443/p@x` keeps its path), an '@' after it within the word. npos when
// there is none. A password of digits only is taken for a port (docs/reliability.md).
size_t password_past_delimiter(const std::string& word, size_t start, size_t authority_end) {
  size_t colon = word.find(':', past_brackets(word, start));
  if (colon == npos || colon >= authority_end || authority_end == word.size()) return npos;
  std::string_view after(word.data() + colon + 1, authority_end - colon - 1);
  bool port = after.empty() || std::all_of(after.begin(), after.end(), [](char c) {
                return std::isdigit(static_cast<unsigned char>(c)) != 0;
              });
  if (port && colon > start) return npos;
  size_t at = word.find('@', authority_end);
  if (at == npos ||
      std::any_of(word.begin() + long(authority_end), word.begin() + long(at), is_space))
    return npos;
  // The host after it ends where the authority would: its last '@' before that is the one.
  size_t host_end = word.find_first_of("/?# \t\n\r", at + 1);
  return word.rfind('@', (host_end == npos ? word.size() : host_end) - 1);
}
}  // namespace

// scheme://user:password@host keeps the user and host, not the password; scheme://token@host
// (how access tokens ride in git URLs) keeps only the host.
// The user part ends at the authority's last '@' (a password may hold '@' itself).
std::string redact_url_password(std::string word) {
  size_t scheme = word.find("://");
  if (scheme == npos) return word;
  size_t start = scheme + 3;
  size_t authority_end = word.find_first_of("/?#", start);
  if (authority_end == npos) authority_end = word.size();
  size_t at = authority_end == start ? npos : word.rfind('@', authority_end - 1);
  if (at == npos || at < start) at = password_past_delimiter(word, start, authority_end);
  if (at == npos) return word;
  size_t colon = word.find(':', past_brackets(word, start));
  if (colon == npos || colon > at) {
    return word.substr(0, start) + "<redacted>" + word.substr(at);
  }
  return word.substr(0, colon + 1) + "<redacted>" + word.substr(at);
}

namespace {
std::string upper(std::string_view name) {
  std::string out(name);
  for (char& c : out) c = char(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// An argument's name looks secret by the environment's rule, by words only arguments use
// (--pwd, --bearer, a cookie header, --creds, a URL's signature), or by short words that say
// so only as a whole part of the name (--jwt, --sas, --sig, sig=, X-Amz-Signature: not --sigma).
// So do the short names people give a password or a one-time code as a whole part (--pw,
// --psw, --otp, --mnemonic: a red-team run kept them, and `pw='x'` in -c code).
bool argument_name_looks_secret(std::string_view name) {
  static constexpr std::string_view kWords[] = {"PWD",   "BEARER",    "COOKIE",
                                                "CREDS", "SIGNATURE", "MNEMONIC"};
  static constexpr std::string_view kParts[] = {"JWT", "SAS", "SIG", "CRED", "PW", "PSW", "OTP"};
  std::string up = upper(name);
  if (name_looks_secret(name) ||
      std::any_of(std::begin(kWords), std::end(kWords),
                  [&](std::string_view w) { return up.find(w) != npos; }))
    return true;
  for (const std::string& part : name_parts(name))
    if (std::find(std::begin(kParts), std::end(kParts), part) != std::end(kParts)) return true;
  return false;
}

// Where a name ends and its value starts inside one word: `--name=value`, `--name value` (one
// quoted argument), `Authorization: Bearer x` (a header), `--name:value` (an option's colon
// form). npos when the word has no value.
size_t value_separator(std::string_view word) {
  size_t eq = word.find('=');
  size_t space = word.find(' ');
  size_t colon = word.find(": ");
  size_t option_colon = !word.empty() && word[0] == '-' ? word.find(':') : std::string_view::npos;
  // `api_key:v`, `x-api-key:v`: a header or config pair without the space, a name before it.
  size_t pair_colon = word.find(':');
  if (pair_colon != std::string_view::npos &&
      !std::all_of(word.begin(), word.begin() + long(pair_colon), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' ||
               c == '"' || c == '\'';
      }))
    pair_colon = std::string_view::npos;
  return std::min({eq, space, colon, option_colon, pair_colon});
}

size_t value_start(std::string_view word, size_t sep) {
  return word.compare(sep, 2, ": ") == 0 ? sep + 2 : sep + 1;
}

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' || c == '.';
}

// Quoted values given to secret-looking names inside one argument: `API_KEY = 'sk-...'` in the
// code of `python3 -c`, `"password": "x"` in a JSON option, `os.environ["HF_TOKEN"] = "x"` and
// a call's quoted pair (`os.environ.setdefault("WANDB_API_KEY", "x")`, `os.putenv(...)`).
std::string redact_quoted_assignments(std::string word) {
  for (size_t i = 0; i < word.size();) {
    if (!is_name_char(word[i])) {
      ++i;
      continue;
    }
    size_t start = i;
    while (i < word.size() && is_name_char(word[i])) ++i;
    std::string name = word.substr(start, i - start);
    size_t j = i;
    bool quoted = j < word.size() && (word[j] == '\'' || word[j] == '"');
    if (quoted) ++j;                                       // a quoted key's end
    if (quoted && j < word.size() && word[j] == ']') ++j;  // a subscript's: environ["K"]
    while (j < word.size() && word[j] == ' ') ++j;
    if (j >= word.size() || (word[j] != '=' && word[j] != ':' && !(quoted && word[j] == ',')))
      continue;
    ++j;
    while (j < word.size() && word[j] == ' ') ++j;
    if (j >= word.size() || (word[j] != '\'' && word[j] != '"')) continue;
    size_t end = word.find(word[j], j + 1);
    if (end == npos) end = word.size();
    if (!argument_name_looks_secret(name)) continue;
    word.replace(j + 1, end - j - 1, "<redacted>");
    i = j + 1 + std::string_view("<redacted>").size() + 1;
  }
  return word;
}

// `aws configure set aws_secret_access_key v`, `git config user.password v`: a bare key whose
// name looks secret, with its value in the next word. A file's name (`secret_key.pem`,
// `run.sig`: a short lower-case extension) is no key.
bool is_bare_secret_key(std::string_view word) {
  if (word.empty() || word[0] == '-' || word.find_first_of("_.") == npos ||
      !std::all_of(word.begin(), word.end(), is_name_char))
    return false;
  if (size_t dot = word.rfind('.'); dot != npos) {
    std::string_view ext = word.substr(dot + 1);
    if (!ext.empty() && ext.size() <= 4 && std::all_of(ext.begin(), ext.end(), [](char c) {
          return std::islower(static_cast<unsigned char>(c)) != 0 ||
                 std::isdigit(static_cast<unsigned char>(c)) != 0;
        }))
      return false;
  }
  return argument_name_looks_secret(word);
}

// The values of secret-looking parameters of a URL's query or of a SAS token
// (`?X-Amz-Signature=v`, `&sig=v`, `sv=...&sig=v`): a parameter starts the word or follows '?'
// or '&', and ends at '&', '#', a space or a quote.
std::string redact_query_values(std::string word) {
  if (word.find_first_of("?&") == npos) return word;
  for (size_t i = 0; i < word.size(); ++i) {
    if (i != 0 && word[i - 1] != '?' && word[i - 1] != '&') continue;
    size_t eq = word.find_first_of("=&?#/ \t\n\r\"'", i);
    if (eq == npos || eq == i || word[eq] != '=') continue;
    size_t end = word.find_first_of("&# \t\n\r\"'", eq + 1);
    if (end == npos) end = word.size();
    if (end == eq + 1 || !argument_name_looks_secret(std::string_view(word).substr(i, eq - i)))
      continue;
    word.replace(eq + 1, end - eq - 1, "<redacted>");
  }
  return word;
}

// `--name`: an option, never the value of the option before it (`-----BEGIN ... KEY-----` is).
bool names_an_option(std::string_view word) {
  return word.size() > 2 && word[0] == '-' && word[1] == '-' &&
         std::isalpha(static_cast<unsigned char>(word[2])) != 0;
}

// `Bearer`, `Basic`, `Token`: the scheme of an Authorization header's value, which comes first.
// Credentials known by their form wherever they stand (a positional argument, inside code or a
// URL): the prefixes providers give their tokens (a red-team run kept sk-proj-..., ghp_...,
// xoxb-..., AKIA... given as arguments), and the secret path of a chat webhook
// (hooks.slack.com/services/T../B../secret). A token's random part is a run of 16 or more
// letters and digits holding a digit or both cases: a run name `sk-resnet50-baseline` or a
// folder `hf_cache_directory_long` has none, and stays (they were redacted for a while).
bool token_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-';
}

bool random_part(std::string_view token) {
  for (size_t i = 0; i < token.size();) {
    size_t j = i;
    bool digit = false, upper = false, lower = false;
    while (j < token.size() && std::isalnum(static_cast<unsigned char>(token[j])) != 0) {
      digit |= std::isdigit(static_cast<unsigned char>(token[j])) != 0;
      upper |= std::isupper(static_cast<unsigned char>(token[j])) != 0;
      lower |= std::islower(static_cast<unsigned char>(token[j])) != 0;
      ++j;
    }
    if (j - i >= 16 && (digit || (upper && lower))) return true;
    i = j + 1;
  }
  return false;
}

std::string redact_known_tokens(std::string word) {
  static constexpr std::string_view kPrefixes[] = {
      "sk-",   "sk_live_",    "sk_test_", "rk_live_", "ghp_",  "gho_",  "ghu_",  "ghs_",
      "ghr_",  "github_pat_", "glpat-",   "hf_",      "xoxb-", "xoxp-", "xoxa-", "xoxr-",
      "xoxs-", "xapp-",       "AKIA",     "ASIA",     "AIza",  "npm_",  "pypi-"};
  for (std::string_view prefix : kPrefixes) {
    for (size_t at = word.find(prefix); at != npos; at = word.find(prefix, at + 1)) {
      if (at > 0 && token_char(word[at - 1])) continue;  // inside a longer word
      size_t end = at + prefix.size();
      while (end < word.size() && token_char(word[end])) ++end;
      std::string_view body =
          std::string_view(word).substr(at + prefix.size(), end - at - prefix.size());
      // AKIA/ASIA keys are 16 upper-case letters and digits after the prefix, no more.
      if (prefix == "AKIA" || prefix == "ASIA") {
        if (body.size() != 16 || !std::all_of(body.begin(), body.end(), [](char c) {
              return std::isupper(static_cast<unsigned char>(c)) ||
                     std::isdigit(static_cast<unsigned char>(c));
            }))
          continue;
      } else if (!random_part(body)) {
        continue;
      }
      word.replace(at, end - at, "<redacted>");
    }
  }
  // A JSON Web Token: three base64url parts joined by dots, the first a JSON object's start
  // ("eyJ", `{"`), the signature last (a red-team run kept one given as an argument).
  for (size_t at = word.find("eyJ"); at != npos; at = word.find("eyJ", at + 1)) {
    if (at > 0 && token_char(word[at - 1])) continue;
    size_t end = at;
    int dots = 0;
    while (end < word.size() && (token_char(word[end]) || word[end] == '.'))
      dots += word[end++] == '.';
    if (dots == 2 && end - at >= 32) word.replace(at, end - at, "<redacted>");
  }
  static constexpr std::string_view kWebhooks[] = {"hooks.slack.com/services/", "/api/webhooks/",
                                                   "outlook.office.com/webhook/",
                                                   ".webhook.office.com/webhookb2/"};
  for (std::string_view hook : kWebhooks) {
    size_t at = word.find(hook);
    if (at == npos) continue;
    size_t start = at + hook.size();
    size_t end = start;
    while (end < word.size() && !is_space(word[end]) && word[end] != '\'' && word[end] != '"')
      ++end;
    if (end > start) word.replace(start, end - start, "<redacted>");
  }
  return word;
}

bool is_auth_scheme(std::string_view word) {
  std::string lower(word);
  for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  return lower == "bearer" || lower == "basic" || lower == "token" || lower == "digest";
}

std::string redact_inside(const std::string& arg);

// The rules, on words in order (a command's arguments, or the words of one argument), in place.
void redact_words(std::vector<std::string>& words) {
  bool value_follows = false;  // the previous word was a secret-looking option without a value
  bool user_follows = false;   // the previous word was curl's -u/--user: user:password
  for (std::string& word : words) {
    if (word.find("<redacted>") != npos) {  // done by an argument-wide rule
      value_follows = user_follows = false;
      continue;
    }
    const std::string given = word;
    size_t sep = value_separator(word);
    std::string_view name = std::string_view(given).substr(0, sep);
    if (user_follows && word.find(':') != npos) {
      word = word.substr(0, word.find(':') + 1) + "<redacted>";
    } else if (value_follows && is_auth_scheme(word)) {
      // `Authorization: Bearer x` as words: the scheme stays, the credential after it goes.
    } else if (value_follows && (word.empty() || word == "--")) {
      // `--token "" x`, `--token -- x`: no value yet; the word after it is taken for one.
    } else if (value_follows && !names_an_option(word)) {
      word = "<redacted>";
      value_follows = false;
    } else if (sep != npos && sep + 1 < word.size() && argument_name_looks_secret(name)) {
      word = word.substr(0, value_start(word, sep)) + "<redacted>";
      value_follows = false;
    } else {
      // `--password x`, and a header's name alone (`Authorization:`) with its value after it.
      value_follows =
          word.size() > 1 && ((word[0] == '-' && argument_name_looks_secret(name)) ||
                              (word.back() == ':' && argument_name_looks_secret(word)) ||
                              (sep == npos && is_bare_secret_key(word)));
      // A name=value inside the value: `--env=AWS_SECRET_ACCESS_KEY=x`. One with words after
      // it (a shell line) is left to redact_inside, word by word: the rest is not all value.
      bool spaced = std::any_of(word.begin(), word.end(), is_space);
      if (sep != npos && !spaced) {
        size_t inner = value_start(word, sep);
        std::string_view value = std::string_view(word).substr(inner);
        size_t inner_sep = value_separator(value);
        if (inner_sep != npos && inner_sep + 1 < value.size() &&
            argument_name_looks_secret(value.substr(0, inner_sep))) {
          word = word.substr(0, inner + value_start(value, inner_sep)) + "<redacted>";
        }
      }
      word = redact_quoted_assignments(word);
      word = redact_query_values(word);
      word = redact_inside(word);
    }
    user_follows = given == "-u" || given == "--user";
    word = redact_url_password(word);
    word = redact_known_tokens(word);
  }
}

// One argument that holds several words (`sh -c '... --password=x ...'`, a wrapper's command
// line, `curl -H "Authorization: Bearer x"` inside a script): its words are redacted as a
// command's are, in place, so a secret option from the third word on is caught too (only the
// argument's first split was; seen with `sh -c 'python train.py --wandb-key=x'`).
std::string redact_inside(const std::string& arg) {
  if (std::none_of(arg.begin(), arg.end(), is_space)) return arg;
  std::vector<std::pair<size_t, size_t>> spans;
  std::vector<std::string> words;
  for (size_t i = 0; i < arg.size();) {
    while (i < arg.size() && is_space(arg[i])) ++i;
    size_t start = i;
    while (i < arg.size() && !is_space(arg[i])) ++i;
    if (i > start) {
      spans.emplace_back(start, i - start);
      words.push_back(arg.substr(start, i - start));
    }
  }
  std::vector<std::string> redacted = words;
  redact_words(redacted);
  std::string out = arg;
  for (size_t k = spans.size(); k-- > 0;) {
    if (redacted[k] != words[k]) out.replace(spans[k].first, spans[k].second, redacted[k]);
  }
  return out;
}
}  // namespace

std::vector<std::string> redact_words(const std::vector<std::string>& argv) {
  std::vector<std::string> out = argv;
  if (out.empty()) return out;
  std::vector<std::string> args(out.begin() + 1, out.end());
  redact_words(args);
  std::copy(args.begin(), args.end(), out.begin() + 1);
  return out;
}

std::string shell_word(const std::string& word) {
  // What a POSIX shell reads as one literal word without quotes; "<redacted>" is the marker,
  // left readable as the secret tests and the docs show it (the line is not for pasting there).
  static constexpr std::string_view kMarker = "<redacted>";
  auto plain = [](char c) {
    auto u = static_cast<unsigned char>(c);
    return std::isalnum(u) || u >= 0x80 ||
           std::string_view("@%+=:,./_-#^~").find(c) != std::string_view::npos;
  };
  bool quote = word.empty() || word[0] == '#' || word[0] == '~';
  for (size_t i = 0; i < word.size() && !quote;) {
    if (word.compare(i, kMarker.size(), kMarker) == 0) {
      i += kMarker.size();
    } else {
      quote = !plain(word[i++]);
    }
  }
  if (!quote) return word;
  // A control character (a tab, a newline of a -c program) shown inside '...' reads as the
  // escape readers print for it, the same as the two characters \t typed: bash's $'...' spells
  // each one, so two different arguments never read alike (a red-team diff said "the commands
  // differ" between two identical-looking lines).
  if (std::any_of(word.begin(), word.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
    std::string out = "$'";
    for (char c : word) {
      auto u = static_cast<unsigned char>(c);
      if (c == '\t')
        out += "\\t";
      else if (c == '\n')
        out += "\\n";
      else if (c == '\r')
        out += "\\r";
      else if (c == '\\' || c == '\'')
        out += std::string("\\") + c;
      else if (u < 0x20 || u == 0x7f)
        out += fmt::format("\\x{:02x}", u);
      else
        out += c;
    }
    return out + "'";
  }
  // Python code given to -c holds single quotes more often than anything a double-quoted word
  // would expand: "..." reads better there than '\'' at each quote.
  if (word.find('\'') != std::string::npos && word.find_first_of("\"$`\\!") == std::string::npos)
    return '"' + word + '"';
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string shell_line(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + shell_word(w);
  return out;
}

std::vector<std::string> shell_words(const std::string& line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (is_space(c)) {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '$' && i + 1 < line.size() && line[i + 1] == '\'') {  // $'...', as shell_word writes
      for (i += 2; i < line.size() && line[i] != '\''; ++i) {
        if (line[i] != '\\' || i + 1 >= line.size()) {
          word += line[i];
          continue;
        }
        char e = line[++i];
        if (e == 't')
          word += '\t';
        else if (e == 'n')
          word += '\n';
        else if (e == 'r')
          word += '\r';
        else if (e == 'x' && i + 2 < line.size() &&
                 std::isxdigit(static_cast<unsigned char>(line[i + 1])) &&
                 std::isxdigit(static_cast<unsigned char>(line[i + 2]))) {
          // Two hex digits, as shell_word writes them; anything else (a line recorded before
          // quoting that holds "$'\\x") is kept as it is: a reader never throws on a command.
          auto hex = [](char h) {
            return std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (h | 0x20) - 'a' + 10;
          };
          word += static_cast<char>(hex(line[i + 1]) * 16 + hex(line[i + 2]));
          i += 2;
        } else
          word += e;
      }
    } else if (c == '\'') {
      size_t end = line.find('\'', i + 1);
      if (end == std::string::npos) end = line.size();
      word.append(line, i + 1, end - i - 1);
      i = end;
    } else if (c == '"') {
      for (++i; i < line.size() && line[i] != '"'; ++i) {
        bool escaped = line[i] == '\\' && i + 1 < line.size() &&
                       std::string_view("\"$`\\").find(line[i + 1]) != std::string_view::npos;
        word += line[escaped ? ++i : i];
      }
    } else if (c == '\\' && i + 1 < line.size()) {
      word += line[++i];
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

std::string redact_arguments(const std::vector<std::string>& argv, bool with_args) {
  if (argv.empty()) return {};
  std::vector<std::string> words = with_args ? redact_words(argv) : std::vector{argv[0]};
  return shell_line(words);
}

}  // namespace sonde
