#pragma once

// Fetching the files of a Telegram message (runtime/telegram.md
// "Attachments"): `getFile` gives a `file_path`, and the bytes come from
// `{api_base}/file/bot<token>/<file_path>`. Every file of a message is
// fetched into memory first, each bounded by what the caps leave (checked
// against `file_size` before asking, and enforced while downloading);
// only when the whole message fits are they stored, so a refused message
// leaves nothing behind.

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/attachment_store.hpp"
#include "runtime/attachments.hpp"
#include "runtime/http_client.hpp"
#include "runtime/telegram_update.hpp"

namespace butlers {

/// What fetching a message's files came to.
struct media_fetch {
  enum class kind : uint8_t {
    /// Every file is stored; `refs` names them, in order.
    stored,
    /// Over a cap, or Telegram will not hand a file over (a 4xx): the
    /// message is refused; `reason` says why, for the person.
    refused,
    /// Telegram or the database failed; try again later (`reason` for
    /// logs).
    retry,
  };
  kind what = kind::retry;
  std::vector<attachment_ref> refs;
  std::string reason;
};

/// The getFile request for `file_id`.
http_request get_file_request(const std::string& api_base,
                              const std::string& token,
                              const std::string& file_id);

/// The download of `file_path`, failing (too_large) past `max_bytes`.
http_request file_download_request(const std::string& api_base,
                                   const std::string& token,
                                   const std::string& file_path,
                                   uint64_t max_bytes);

/// Fetches and stores the files of one message. `fetch` performs one HTTP
/// request (blocking; `cancel` is the stop flag); with a null `store` (no
/// database) the answer is `retry`.
media_fetch fetch_telegram_media(
  const std::vector<telegram_media>& media, const attachment_limits& caps,
  const std::string& api_base, const std::string& token,
  const std::function<http_response(const http_request&,
                                    const std::atomic<bool>*)>& fetch,
  attachment_store* store, const std::atomic<bool>* cancel);

/// The notify.v1 (a `send` to the chat) that tells the person why their
/// message was not taken; `key` makes a repeated refusal one delivery.
std::string attachment_refusal_notify(const std::string& channel,
                                      const std::string& recipient,
                                      const std::string& reason,
                                      const std::string& key);

} // namespace butlers
