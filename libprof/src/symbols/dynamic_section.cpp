#include "symbols/dynamic_section.hpp"

#include <cstring>

namespace sonde {

namespace {

// glibc adds the load bias to the pointers of a writable dynamic section in place as it loads
// the object (elf_get_dynamic_info), and leaves a read-only one (the vDSO's, some linkers')
// as the file has it. Which it did is read from the result: the bias added where the value
// alone does not point into the object.
template <class T>
const T* pointer(const DynamicSection& d, ElfAddr value, size_t bytes) {
  auto as_is = reinterpret_cast<const T*>(value);
  if (d.inside(as_is, bytes)) return as_is;
  auto biased = reinterpret_cast<const T*>(value + d.base);
  return d.inside(biased, bytes) ? biased : nullptr;
}

uint32_t gnu_hash_of(const char* name) {
  uint32_t h = 5381;
  for (auto c = reinterpret_cast<const unsigned char*>(name); *c != 0; ++c) h = h * 33 + *c;
  return h;
}

uint32_t sysv_hash_of(const char* name) {
  uint32_t h = 0;
  for (auto c = reinterpret_cast<const unsigned char*>(name); *c != 0; ++c) {
    h = (h << 4) + *c;
    h ^= (h >> 24) & 0xf0;
  }
  return h & 0x0fffffff;
}

}  // namespace

bool DynamicSection::inside(const void* address, size_t bytes) const {
  auto a = reinterpret_cast<ElfAddr>(address);
  for (int i = 0; i < phnum; ++i) {
    const ElfPhdr& p = phdr[i];
    if (p.p_type != PT_LOAD) continue;
    ElfAddr start = base + p.p_vaddr;
    if (a >= start && a <= start + p.p_memsz && bytes <= start + p.p_memsz - a) return true;
  }
  return false;
}

const char* DynamicSection::name_of(const ElfSym& sym) const {
  return sym.st_name < strsz ? strtab + sym.st_name : nullptr;
}

size_t DynamicSection::symbol_count() const {
  if (sysv_hash != nullptr) return sysv_hash[1];  // nchain: one per symbol
  if (gnu_hash == nullptr) return 0;
  // GNU hash: the last chain ends the table; buckets hold the first index of each chain.
  uint32_t nbuckets = gnu_hash[0], symoffset = gnu_hash[1], bloom_words = gnu_hash[2];
  const auto* buckets = reinterpret_cast<const uint32_t*>(
      reinterpret_cast<const ElfAddr*>(gnu_hash + 4) + bloom_words);
  const uint32_t* chains = buckets + nbuckets;
  if (!inside(gnu_hash, 16) || !inside(buckets, sizeof(uint32_t) * nbuckets)) return 0;
  uint32_t last = 0;
  for (uint32_t b = 0; b < nbuckets; ++b) last = buckets[b] > last ? buckets[b] : last;
  if (last < symoffset) return symoffset;
  while (inside(chains + (last - symoffset), 4) && (chains[last - symoffset] & 1) == 0) ++last;
  return last + 1;
}

const ElfSym* DynamicSection::defined(const char* name) const {
  auto match = [&](uint32_t i) -> const ElfSym* {
    if (i >= symtab_room) return nullptr;
    const ElfSym& s = symtab[i];
    const char* n = name_of(s);
    return s.st_shndx != SHN_UNDEF && n != nullptr && std::strcmp(n, name) == 0 ? &s : nullptr;
  };
  if (gnu_hash != nullptr) {
    uint32_t nbuckets = gnu_hash[0], symoffset = gnu_hash[1], bloom_words = gnu_hash[2];
    uint32_t shift = gnu_hash[3];
    const auto* bloom = reinterpret_cast<const ElfAddr*>(gnu_hash + 4);
    const auto* buckets = reinterpret_cast<const uint32_t*>(bloom + bloom_words);
    const uint32_t* chains = buckets + nbuckets;
    if (nbuckets == 0 || bloom_words == 0 || !inside(buckets, sizeof(uint32_t) * nbuckets))
      return nullptr;
    constexpr uint32_t kBits = sizeof(ElfAddr) * 8;
    uint32_t h = gnu_hash_of(name);
    ElfAddr word = bloom[(h / kBits) % bloom_words];
    ElfAddr mask = (ElfAddr{1} << (h % kBits)) | (ElfAddr{1} << ((h >> shift) % kBits));
    if ((word & mask) != mask) return nullptr;
    for (uint32_t i = buckets[h % nbuckets]; i >= symoffset; ++i) {
      const uint32_t* chain = chains + (i - symoffset);
      if (!inside(chain, 4)) return nullptr;
      if (((*chain ^ h) >> 1) == 0) {
        if (const ElfSym* s = match(i)) return s;
      }
      if ((*chain & 1) != 0) break;
    }
    return nullptr;
  }
  if (sysv_hash != nullptr) {
    uint32_t nbuckets = sysv_hash[0];
    const uint32_t* buckets = sysv_hash + 2;
    const uint32_t* chains = buckets + nbuckets;
    if (nbuckets == 0 || !inside(buckets, sizeof(uint32_t) * (nbuckets + sysv_hash[1])))
      return nullptr;
    for (uint32_t i = buckets[sysv_hash_of(name) % nbuckets]; i != 0 && i < sysv_hash[1];
         i = chains[i]) {
      if (const ElfSym* s = match(i)) return s;
    }
  }
  return nullptr;
}

const ElfDyn* dynamic_of(const dl_phdr_info& info) {
  for (int i = 0; i < info.dlpi_phnum; ++i) {
    if (info.dlpi_phdr[i].p_type == PT_DYNAMIC) {
      return reinterpret_cast<const ElfDyn*>(info.dlpi_addr + info.dlpi_phdr[i].p_vaddr);
    }
  }
  return nullptr;
}

const char* read_dynamic_section(const dl_phdr_info& info, DynamicSection& d) {
  d = DynamicSection{};
  d.base = info.dlpi_addr;
  d.phdr = info.dlpi_phdr;
  d.phnum = info.dlpi_phnum;
  d.dynamic = dynamic_of(info);
  if (d.dynamic == nullptr) return "no dynamic section";
  if (!d.inside(d.dynamic, sizeof(ElfDyn))) return "a dynamic section outside the object";
  ElfAddr symtab = 0, strtab = 0, rela = 0, jmprel = 0, gnu = 0, sysv = 0;
  size_t relasz = 0, pltrelsz = 0;
  for (const ElfDyn* e = d.dynamic; e->d_tag != DT_NULL; ++e) {
    if (!d.inside(e + 1, sizeof(ElfDyn))) return "an unterminated dynamic section";
    switch (e->d_tag) {
      case DT_SYMTAB:
        symtab = e->d_un.d_ptr;
        break;
      case DT_STRTAB:
        strtab = e->d_un.d_ptr;
        break;
      case DT_STRSZ:
        d.strsz = e->d_un.d_val;
        break;
      case DT_RELA:
        rela = e->d_un.d_ptr;
        break;
      case DT_RELASZ:
        relasz = e->d_un.d_val;
        break;
      case DT_RELACOUNT:
        d.relative_count = e->d_un.d_val;
        break;
      case DT_JMPREL:
        jmprel = e->d_un.d_ptr;
        break;
      case DT_PLTRELSZ:
        pltrelsz = e->d_un.d_val;
        break;
      case DT_GNU_HASH:
        gnu = e->d_un.d_ptr;
        break;
      case DT_HASH:
        sysv = e->d_un.d_ptr;
        break;
      case DT_RELAENT:
        if (e->d_un.d_val != sizeof(ElfRela)) return "relocations of an unknown size";
        break;
      case DT_PLTREL:
        if (e->d_un.d_val != DT_RELA) return "REL relocations for the PLT";
        break;
      case DT_REL:
        return "REL relocations";
      default:
        break;
    }
  }
  if (symtab == 0 || strtab == 0) return nullptr;  // nothing named, nothing to rebind
  d.symtab = pointer<ElfSym>(d, symtab, sizeof(ElfSym));
  d.strtab = pointer<char>(d, strtab, d.strsz);
  if (d.symtab == nullptr || d.strtab == nullptr) return "a symbol table outside the object";
  for (int i = 0; i < d.phnum; ++i) {  // the room left in the segment that holds it
    const ElfPhdr& p = d.phdr[i];
    auto start = d.base + p.p_vaddr, at = reinterpret_cast<ElfAddr>(d.symtab);
    if (p.p_type == PT_LOAD && at >= start && at < start + p.p_memsz)
      d.symtab_room = (start + p.p_memsz - at) / sizeof(ElfSym);
  }
  if (gnu != 0) d.gnu_hash = pointer<uint32_t>(d, gnu, 16);
  if (sysv != 0) d.sysv_hash = pointer<uint32_t>(d, sysv, 8);
  if (rela != 0 && relasz != 0) {
    d.rela = pointer<ElfRela>(d, rela, relasz);
    if (d.rela == nullptr) return "relocations outside the object";
    d.rela_count = relasz / sizeof(ElfRela);
    if (d.relative_count > d.rela_count) d.relative_count = 0;
  }
  if (jmprel != 0 && pltrelsz != 0) {
    d.jmprel = pointer<ElfRela>(d, jmprel, pltrelsz);
    if (d.jmprel == nullptr) return "PLT relocations outside the object";
    d.jmprel_count = pltrelsz / sizeof(ElfRela);
  }
  return nullptr;
}

}  // namespace sonde
