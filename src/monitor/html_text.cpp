// HTML text helpers (html_text.h).
#include "monitor/html_text.h"

#include "monitor/html_report.h"

namespace deepshard::monitor {

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// JSON inside <script>: "</" must not close the element.
std::string script_json(const nlohmann::json& j) {
  std::string s = j.dump();
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<' && i + 1 < s.size() && s[i + 1] == '/') {
      out += "<\\/";
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string page_head(const std::string& title, const std::string& style) {
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  h += "<title>" + html_escape(title) + "</title>\n<style>\n" +
       "body{font-family:sans-serif;margin:20px;color:#222}" + style + "\n</style>\n";
  h += "<script>\nwindow.dsErrors = [];\n"
       "window.addEventListener('error', e => window.dsErrors.push(String(e.message)));\n"
       "const dsConsoleError = console.error;\n"
       "console.error = (...a) => { window.dsErrors.push(a.join(' ')); "
       "dsConsoleError.apply(console, a); };\n</script>\n";
  h += "<script>\n" + chartjs_source() + "\n</script>\n</head>\n<body>\n";
  return h;
}

}  // namespace deepshard::monitor
