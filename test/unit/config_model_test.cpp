// `[butler.runtime]` of the HTTP model runtimes (`openai`, `anthropic`):
// the keys, their checks across keys, the system prompt file read at load,
// and check-config's output reading back the same.

#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/config.hpp"

namespace butlers {
namespace {

std::string butler(const std::string& runtime) {
  return "[[butler]]\nname = \"general\"\n[butler.runtime]\n" + runtime;
}

std::vector<config_error> validated(const std::string& toml) {
  auto res = parse_config(toml, "node.toml");
  EXPECT_TRUE(res.errors.empty())
    << (res.errors.empty() ? "" : res.errors[0].to_string());
  if (!res.settings)
    return {};
  return validate_settings(*res.settings);
}

const config_error* find(const std::vector<config_error>& errors,
                         const std::string& key) {
  for (auto& e : errors)
    if (e.key == key)
      return &e;
  return nullptr;
}

TEST(config_model, an_openai_runtime_reads_and_prints_back) {
  auto toml = butler("kind = \"openai\"\nbase_url = \"http://127.0.0.1:8080\"\n"
                     "model = \"qwen\"\napi_key_env = \"OPENAI_API_KEY\"\n"
                     "max_tokens = 512\ntemperature = 0.2\n"
                     "system_prompt = \"Be brief.\"\ntimeout_s = 60\n"
                     "max_model_calls = 4\nretries = 2\nretry_base_ms = 100\n"
                     "retry_max_ms = 5000\n");
  auto res = parse_config(toml, "node.toml");
  ASSERT_TRUE(res.settings) << res.errors[0].to_string();
  auto& rt = res.settings->butlers[0].runtime;
  EXPECT_EQ(rt.kind, runtime_kind::openai);
  EXPECT_EQ(rt.base_url, "http://127.0.0.1:8080");
  EXPECT_EQ(rt.model, "qwen");
  EXPECT_EQ(rt.api_key_env, "OPENAI_API_KEY");
  EXPECT_EQ(rt.max_tokens, 512u);
  EXPECT_DOUBLE_EQ(rt.temperature, 0.2);
  EXPECT_EQ(rt.system_prompt, "Be brief.");
  EXPECT_EQ(rt.timeout_s, 60u);
  EXPECT_EQ(rt.max_model_calls, 4u);
  EXPECT_EQ(rt.retries, 2u);
  EXPECT_TRUE(validate_settings(*res.settings).empty());
  auto printed = to_toml(*res.settings);
  auto again = parse_config(printed, "printed.toml");
  ASSERT_TRUE(again.settings) << again.errors[0].to_string() << printed;
  EXPECT_TRUE(*again.settings == *res.settings);
  // Unset temperature is left out of the output (it would not read back).
  auto plain = parse_config(butler("kind = \"anthropic\"\nbase_url = "
                                   "\"https://api.anthropic.com\"\nmodel = "
                                   "\"claude\"\n"),
                            "node.toml");
  ASSERT_TRUE(plain.settings);
  EXPECT_LT(plain.settings->butlers[0].runtime.temperature, 0.0);
  auto out = to_toml(*plain.settings);
  EXPECT_EQ(out.find("temperature"), std::string::npos) << out;
  EXPECT_TRUE(parse_config(out, "printed.toml").settings);
}

TEST(config_model, base_url_and_model_are_required_and_checked) {
  auto errors = validated(butler("kind = \"openai\"\n"));
  ASSERT_EQ(errors.size(), 2u);
  auto* url = find(errors, "butler[0].runtime.base_url");
  ASSERT_NE(url, nullptr);
  EXPECT_NE(url->message.find("requires base_url"), std::string::npos)
    << url->message;
  EXPECT_NE(find(errors, "butler[0].runtime.model"), nullptr);
  auto v1 = validated(butler("kind = \"anthropic\"\nbase_url = "
                             "\"https://api.anthropic.com/v1/\"\nmodel = "
                             "\"c\"\n"));
  ASSERT_EQ(v1.size(), 1u);
  EXPECT_EQ(v1[0].key, "butler[0].runtime.base_url");
  EXPECT_NE(v1[0].message.find("leave out the trailing /v1"), std::string::npos)
    << v1[0].message;
  auto bad = parse_config(butler("kind = \"openai\"\nbase_url = "
                                 "\"ftp://x\"\nmodel = \"m\"\n"),
                          "node.toml");
  ASSERT_EQ(bad.errors.size(), 1u);
  EXPECT_EQ(bad.errors[0].key, "butler[0].runtime.base_url");
  auto env = parse_config(butler("kind = \"openai\"\napi_key_env = "
                                 "\"MY-KEY\"\n"),
                          "node.toml");
  ASSERT_EQ(env.errors.size(), 1u);
  EXPECT_EQ(env.errors[0].key, "butler[0].runtime.api_key_env");
  auto temp = parse_config(butler("temperature = 2.5\n"), "node.toml");
  ASSERT_EQ(temp.errors.size(), 1u);
  EXPECT_EQ(temp.errors[0].key, "butler[0].runtime.temperature");
}

TEST(config_model, one_system_prompt_and_backoff_within_its_cap) {
  auto both = validated(butler("kind = \"openai\"\nbase_url = \"http://h\"\n"
                               "model = \"m\"\nsystem_prompt = \"a\"\n"
                               "system_prompt_file = \"p.md\"\n"
                               "retry_base_ms = 9000\nretry_max_ms = 100\n"));
  ASSERT_EQ(both.size(), 2u);
  auto* prompt = find(both, "butler[0].runtime.system_prompt_file");
  ASSERT_NE(prompt, nullptr);
  EXPECT_NE(prompt->message.find("not both"), std::string::npos);
  EXPECT_EQ(prompt->line, 8);
  EXPECT_NE(find(both, "butler[0].runtime.retry_base_ms"), nullptr);
  // Other kinds do not need a server.
  EXPECT_TRUE(validated(butler("kind = \"scripted\"\n")).empty());
}

TEST(config_model, load_config_reads_the_system_prompt_file_next_to_it) {
  auto dir = testing::TempDir();
  auto config = dir + "butlers_model_config.toml";
  auto prompt = dir + "butlers_model_prompt.md";
  auto write = [](const std::string& path, const std::string& text) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fputs(text.c_str(), f);
    std::fclose(f);
  };
  write(prompt, "You are the household butler.\n");
  write(config, butler("kind = \"openai\"\nbase_url = \"http://h\"\n"
                       "model = \"m\"\nsystem_prompt_file = "
                       "\"butlers_model_prompt.md\"\n"));
  auto res = load_config(config);
  ASSERT_TRUE(res.settings) << res.errors[0].to_string();
  EXPECT_EQ(res.settings->butlers[0].runtime.system_prompt_text,
            "You are the household butler.\n");
  std::remove(prompt.c_str());
  auto missing = load_config(config);
  std::remove(config.c_str());
  EXPECT_FALSE(missing.settings);
  ASSERT_EQ(missing.errors.size(), 1u);
  EXPECT_EQ(missing.errors[0].key, "butler[0].runtime.system_prompt_file");
  EXPECT_EQ(missing.errors[0].line, 7);
  EXPECT_NE(missing.errors[0].message.find("cannot read"), std::string::npos);
}

} // namespace
} // namespace butlers
