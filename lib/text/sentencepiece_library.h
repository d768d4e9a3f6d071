#pragma once
// SentencePiece, loaded in its own symbol scope (see sentencepiece_shim.cc for why): the C functions of the
// parla_sentencepiece module. Internal to parla::text; use SentencePieceVocab and train_sentencepiece.
#include <cstddef>

namespace parla::text::detail {

struct SentencePieceLibrary {
  void* (*load)(const char* data, size_t n, int from_file, char** error);
  void (*free_model)(void* m);
  void (*free)(void* p);
  int (*encode)(const void* m, const char* text, size_t n, int** ids, size_t* count, char** error);
  int (*encode_pieces)(const void* m, const char* text, size_t n, char** joined, size_t** lens, size_t* count,
                       char** error);
  int (*decode)(const void* m, const int* ids, size_t n, char** text, size_t* len, char** error);
  int (*decode_pieces)(const void* m, const char* const* pieces, const size_t* lens, size_t n, char** text,
                       size_t* len, char** error);
  int (*size)(const void* m);
  int (*piece_to_id)(const void* m, const char* piece, size_t n);
  char* (*id_to_piece)(const void* m, int id, size_t* len);
  float (*score)(const void* m, int id);
  int (*special_id)(const void* m, int which);
  char* (*proto)(const void* m, size_t* len);
  int (*train)(const char* const* keys, const char* const* values, size_t n_kwargs, const char* const* sentences,
               const size_t* lens, size_t n, unsigned seed, char** proto, size_t* proto_len, char** error);
};

// Loads the module once: $PARLA_SENTENCEPIECE_MODULE, else the build's path, else ../lib/ next to the
// executable. Throws DataError naming the places tried when it cannot.
const SentencePieceLibrary& sentencepiece_library();

}  // namespace parla::text::detail
