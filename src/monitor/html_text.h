// Text for the HTML pages (the run report, the autotuning page): escaping for element content and
// attributes, JSON safe inside a <script> element, and the pages' common head. Private to the
// monitor layer.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace deepshard::monitor {

std::string html_escape(const std::string& s);
// JSON inside <script>: "</" must not close the element.
std::string script_json(const nlohmann::json& j);

// "<!DOCTYPE html>...<body>\n": the title, the page's CSS (after the common body rule), the script
// that records JavaScript errors in window.dsErrors before anything else runs (the browser test
// reads them), and the inlined Chart.js.
std::string page_head(const std::string& title, const std::string& style);

}  // namespace deepshard::monitor
