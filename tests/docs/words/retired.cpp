// The fixture of docs_words_finds_a_retired_word: both rules, once each.
// Each rank reduces its chunk of the buffer in the shared segment.
int main() { return 0; }
